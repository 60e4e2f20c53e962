"""The suite's heartbeat (progress_heartbeat.py): a test that runs longer than the silence limit
gets a line on the terminal naming it, while its own output stays captured."""
import os
import subprocess
import sys

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
