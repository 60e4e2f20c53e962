"""run.sh rebuilds the C++ extension only when a source it is compiled from changed (issue 37):
in a copy of the repository's run.sh, setup.py, tools/extension_stamp.py and kernels/, with a
stand-in compiled module and the stamp a build writes, the writers of the test suite and of the
tools run (fetch_npu_headers.sh, build logs, bench results, caches, fresh timestamps on every
source), and then the jobs' rebuild check (MXS_DRY_RUN=1, which reports it) must find nothing
to build; an edited kernel source must be found."""
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_stamp_tool(root):
    spec = importlib.util.spec_from_file_location("extension_stamp_copy", os.path.join(root, "tools",
                                                                                      "extension_stamp.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def clone(tmp_path):
    """The files run.sh's check reads, copied (kernels/ without build folders), a stand-in
    mx_sparse/_C*.so, and the stamp a build would have written."""
    root = tmp_path / "clone"
    for rel in ("run.sh", "setup.py", "tools/extension_stamp.py", "requirements/pins.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), root / rel)
    shutil.copytree(os.path.join(ROOT, "kernels"), root / "kernels",
                    ignore=shutil.ignore_patterns("build", "__pycache__"))
    (root / "mx_sparse").mkdir()
    (root / "mx_sparse" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"stand-in")
    tool = load_stamp_tool(str(root))
    tool.write_stamp(str(root / "mx_sparse"), tool.digest(str(root)))
    return root


def rebuild_check(root, job="bench"):
    """run.sh's own check, as the job would run it (the dry run reports it on stderr)."""
    res = subprocess.run(["bash", str(root / "run.sh"), job, "--help"], cwd=root, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "MXS_DRY_RUN": "1", "MXS_PYTHON": sys.executable})
    assert res.returncode == 0, res.stderr
    return res.stderr


def fake_python(tmp_path):
    """A stand-in for the PYTHON fetch_npu_headers.sh runs `-m pip download` with: it writes the two
    wheels (zip files holding a header each) where pip would, so that the script runs to the end
    without the network and writes what it writes in the suite."""
    script = tmp_path / "fake_python"
    script.write_text(f"""#!{sys.executable}
import sys, zipfile
d = sys.argv[sys.argv.index("-d") + 1]
for wheel, member in (("torch-2.14.0-cp311-none-any.whl", "torch/include/ATen/Tensor.h"),
                      ("torch_npu-2.14.0-cp311-none-any.whl", "torch_npu/include/torch_npu/npu.h")):
    with zipfile.ZipFile(d + "/" + wheel, "w") as z:
        z.writestr(member, "#pragma once\\n")
""")
    script.chmod(0o755)
    return script


def run_suite_writers(root, tmp_path):
    out = subprocess.run(["bash", str(root / "kernels/ascend/binding/fetch_npu_headers.sh"), str(fake_python(tmp_path))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    headers = out.stdout.strip().splitlines()[-1]
    assert os.path.exists(os.path.join(headers, ".complete")) and os.path.exists(
        os.path.join(headers, "torch", "include", "ATen", "Tensor.h"))
    # what other jobs leave behind: the set-up log, bench results, byte-code caches, an
    # emulator build folder under kernels/ (the ignored build folders of the tree)
    for rel in ("build/setup.log", "bench/results/results.json", "kernels/cpu/__pycache__/x.pyc",
                "kernels/ascend/build/npu_headers/.complete", "kernels/ascend/build/extra.h"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("written by a job\n")
    # every source newer than the compiled module (a checkout or a copy does this)
    for here, _, names in os.walk(root / "kernels"):
        for n in names:
            os.utime(os.path.join(here, n))
    os.utime(root / "setup.py")


def test_the_suites_writers_trigger_no_rebuild(clone, tmp_path):
    assert "up to date (no build)" in rebuild_check(clone)
    run_suite_writers(clone, tmp_path)
    for job in ("bench", "train", "test"):
        err = rebuild_check(clone, job)
        assert "up to date (no build)" in err and "would be built" not in err, err


def test_an_edited_source_triggers_a_rebuild(clone):
    src = clone / "kernels" / "cpu" / "gemm_rows.cpp"
    src.write_text(src.read_text() + "\n// edited\n")
    err = rebuild_check(clone)
    assert "would be built (a C++ source or setup.py changed" in err, err


def test_no_stamp_or_no_module_means_a_build(clone):
    (clone / "mx_sparse" / "_C.sources.sha256").unlink()
    assert "would be built (no source stamp" in rebuild_check(clone)
    (clone / "mx_sparse" / "_C.cpython-311-x86_64-linux-gnu.so").unlink()
    assert "would be built (no compiled extension" in rebuild_check(clone)


def test_the_digest_covers_exactly_the_tracked_sources():
    """The files hashed are the tracked C/C++ files under kernels/ and setup.py: none that git
    ignores (outputs), none tracked left out."""
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    res = subprocess.run(["git", "ls-files", "setup.py", "kernels"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    tool = load_stamp_tool(ROOT)
    tracked = {f for f in res.stdout.split() if f == "setup.py" or f.endswith(tool.SOURCE_SUFFIXES)}
    assert set(tool.source_files(ROOT)) == tracked
