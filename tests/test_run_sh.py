"""run.sh's argument handling, checked without setting anything up (MXS_DRY_RUN=1 prints the
command a job would run and stops): path options resolved from the caller's directory, pytest
paths, errors for unknown jobs and missing values; and the supported versions stated in one
place (requirements/pins.txt) agree with setup.py and the README."""
import os
import re
import shlex
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_SH = os.path.join(ROOT, "run.sh")


def dry_run(args, cwd):
    res = subprocess.run(["bash", RUN_SH, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MXS_DRY_RUN": "1"})
    assert res.returncode == 0, res.stderr
    words = shlex.split(res.stdout.strip())
    assert words[:3] == ["cd", ROOT, "&&"], res.stdout
    return words[3:]


def pins():
    text = open(os.path.join(ROOT, "requirements", "pins.txt"), encoding="utf-8").read()
    return dict(re.findall(r"^([a-z-]+)[=<>]=(\S+)", text, re.M))


@pytest.mark.parametrize("script", ["run.sh", ".ci/run"])
def test_scripts_parse(script):
    res = subprocess.run(["bash", "-n", os.path.join(ROOT, script)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_path_options_resolve_from_the_callers_directory(tmp_path):
    where = tmp_path / "a dir with spaces"
    where.mkdir()
    cmd = dry_run(["train", "--points", "kitti bins", "--config=cfg.yaml", "--resume", "/abs/ckpt.pt",
                   "--steps", "3", "--labels", "~/labels"], cwd=where)
    assert cmd[1:] == ["examples/train_second.py", "--points", str(where / "kitti bins"),
                       f"--config={where / 'cfg.yaml'}", "--resume", "/abs/ckpt.pt", "--steps", "3",
                       "--labels", os.path.expanduser("~/labels")]
    assert cmd[0] == os.path.join(ROOT, ".venv", "bin", "python")


def test_test_job_takes_test_paths_from_the_callers_directory(tmp_path):
    (tmp_path / "test_mine.py").write_text("def test_a():\n    pass\n")
    cmd = dry_run(["test", "test_mine.py::test_a", "-k", "subm", "-q"], cwd=tmp_path)
    assert cmd[1:] == ["-m", "pytest", f"{tmp_path}/test_mine.py::test_a", "-k", "subm", "-q"]
    # without a path the whole suite is collected, on a worker per core unless the arguments choose
    assert dry_run(["test", "-k", "subm"], cwd=tmp_path)[1:] == ["-m", "pytest", "tests", "-n", "auto", "-k", "subm"]
    for own in (["-n", "0"], ["-n4"], ["--numprocesses=3"], ["-p", "no:xdist"], ["-s"], ["--pdb"]):
        assert dry_run(["test", *own, "-k", "subm"], cwd=tmp_path)[1:] == ["-m", "pytest", "tests", *own, "-k", "subm"]


def test_bench_and_unknown_job(tmp_path):
    assert dry_run(["bench", "--quick"], cwd=tmp_path)[1:] == ["-m", "bench", "--quick"]
    res = subprocess.run(["bash", RUN_SH, "trian"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "bash run.sh train" in res.stderr
    res = subprocess.run(["bash", RUN_SH, "train", "--points"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MXS_DRY_RUN": "1"})
    assert res.returncode == 2 and "--points needs a path" in res.stderr
    res = subprocess.run(["bash", RUN_SH, "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "bash run.sh install" in res.stdout and "MXS_DRY_RUN" in res.stdout


def test_supported_versions_are_stated_once():
    p = pins()
    assert {"python", "torch", "triton", "spconv"} <= set(p)
    setup_py = open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()
    assert f'python_requires=">={p["python"]}"' in setup_py
    for readme in ("README.md", "README.zh.md"):
        text = open(os.path.join(ROOT, readme), encoding="utf-8").read()
        assert f"Python {p['python']}" in text and f"torch {p['torch']}" in text, readme
        assert "requirements/pins.txt" in text, readme
        assert not re.search(r"Python 3\.(?!%s)\d+\+" % p["python"].split(".")[1], text), readme


def test_install_is_a_regular_install(tmp_path):
    """Not editable: an editable install's import hook loses to the namespace package a clone
    folder named mx_sparse makes beside a script (README: the trap); a regular one does not."""
    cmd = dry_run(["install"], cwd=tmp_path)
    assert cmd[1:] == ["-m", "pip", "install", "--no-build-isolation", ROOT]
