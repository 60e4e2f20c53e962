"""Entry points a user runs: --help complete (every option explained), python -m mx_sparse's
options, a clear error for a device this torch build lacks, and the bench summary as printed on
the terminal (what each ratio compares, the machine-load warning)."""
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY_POINTS = ["mx_sparse", "bench", "bench.soak", "bench.scale", "bench.voxelize", "bench.ascend_cost"]


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def undocumented_options(help_text: str):
    """Options of argparse's help without a description (on their line or the next)."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith(("options:", "optional arguments:")))
    missing = []
    for i in range(start + 1, len(lines)):
        m = re.match(r"^  (-[\w-]+(?: [A-Z_]+)?(?:, --[\w-]+(?: [A-Z_]+)?)?)( {2,}\S.*)?$", lines[i])
        if not m:
            continue
        described = m.group(2) or (i + 1 < len(lines) and re.match(r"^ {8,}\S", lines[i + 1]))
        if not described:
            missing.append(m.group(1))
    return missing


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_explains_every_option(module):
    res = run("-m", module, "--help")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"usage: python -m {module}"), res.stdout[:200]
    assert not undocumented_options(res.stdout), (module, undocumented_options(res.stdout))


def test_python_m_mx_sparse():
    res = run("-m", "mx_sparse", "--help")
    assert "show_config" in res.stdout and "backends" not in res.stdout   # help only, no report
    import mx_sparse
    assert run("-m", "mx_sparse", "--version").stdout.strip() == f"mx_sparse {mx_sparse.__version__}"
    res = run("-m", "mx_sparse", "--bogus")
    assert res.returncode == 2 and "unrecognized arguments: --bogus" in res.stderr
    assert f"mx_sparse {mx_sparse.__version__}" in run("-m", "mx_sparse").stdout


def test_internal_child_explains_itself():
    res = run("-m", "bench.memory", "--help")
    assert res.returncode == 1 and "internal" in res.stderr and "python -m bench" in res.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a torch build without CUDA")
def test_bench_device_this_torch_lacks():
    res = run("-m", "bench", "--device", "cuda", "--quick")
    assert res.returncode == 2 and "--device cuda" in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]


def fake_results(other_cpu_share):
    t = {"mx_sparse": {"median": 0.010, "min": 0.009}, "spconv-1t": {"median": 0.030, "min": 0.028}}
    return dict(threads=2, variants=[{"name": "mx_sparse"}, {"name": "spconv-1t"}], runtime_s=90.0,
                other_cpu_share=other_cpu_share, machine=dict(logical_cpus=2),
                workloads={"second_kitti_1k": dict(forward=t, train=t, train_f64=t,
                                                  maps={"mx_sparse": {"median": 1, "min": 1}})})


def test_bench_summary_reads_on_a_terminal():
    from bench import report
    text = report.summary(fake_results(0.35))
    assert "Speedup = spconv 2.3.8 time / mx_sparse time" in text
    row = next(line for line in text.splitlines() if line.startswith("second_kitti_1k"))
    assert row.split()[1:] == ["3.00x", "3.00x", "3.00x", "n/a"]   # 0.030 / 0.010; maps: no spconv figure
    assert "1 000-voxel VoxelBackBone8x fwd+bwd (speedup): goal not slower (>= 1x), measured 3.00x (met)" in text
    assert "VoxelBackBone8x fwd+bwd in float64 (speedup): goal >= 1x (every size), measured 3.00x (lowest) (met)" in text
    assert "WARNING: other processes used 35 % of the CPUs" in text
    assert "–" not in text and "Targets (from the issue)" not in text
    assert "WARNING" not in report.summary(fake_results(0.02))
