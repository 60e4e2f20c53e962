"""The suite's heartbeat (progress_heartbeat.py): a test that runs longer than the silence limit
gets a line on the terminal naming it, while its own output stays captured."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a_long_test_is_named_on_the_terminal(tmp_path):
    (tmp_path / "test_long.py").write_text("import time\n\ndef test_long():\n    print('captured')\n"
                                           "    time.sleep(4)\n\ndef test_short():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": HERE, "MXS_TEST_HEARTBEAT_S": "1"}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "progress_heartbeat",
                          "test_long.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "still running test_long.py::test_long (" in res.stdout
    assert "test_short" not in res.stdout and "captured" not in res.stdout


def test_under_xdist_the_controller_names_a_long_test_while_another_worker_is_idle(tmp_path):
    """Two workers: one finishes its short test at once, the other runs the long one; the line
    names the long test (a worker that finished must not clear what another is running)."""
    pytest.importorskip("xdist", reason="pytest-xdist runs the suite's workers (bash run.sh test installs it)")
    (tmp_path / "test_long.py").write_text("import time\n\ndef test_long():\n    time.sleep(4)\n\n"
                                           "def test_short():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": HERE, "MXS_TEST_HEARTBEAT_S": "1"}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "progress_heartbeat",
                          "-n", "2", "test_long.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "still running test_long.py::test_long (" in res.stdout
    assert "still running test_long.py::test_short" not in res.stdout
