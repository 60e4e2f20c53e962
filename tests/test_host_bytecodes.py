"""bench/host_bytecodes.py: the areas files are counted under, the report's rows and totals (hand-made
counts), and one real count of the CPU path on a tiny KITTI crop (its own interpreter): the layers' and
torch's Python runs, none of the accelerator code does, and a second count gives the same numbers
(a count, not a time)."""
from bench import host_bytecodes


def test_areas():
    assert host_bytecodes.area("/x/mx_sparse/nn/conv.py") == "mx_sparse/nn"
    assert host_bytecodes.area("/x/mx_sparse/_accelerator/gather_mm.py") == "mx_sparse/_accelerator"
    assert host_bytecodes.area("/x/mx_sparse/runtime/ascend.py") == "mx_sparse (other)"
    assert host_bytecodes.area("/x/mx_sparse/__init__.py") == "mx_sparse (other)"
    assert host_bytecodes.area("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py") == "torch"
    assert host_bytecodes.area("/usr/lib/python3.11/contextlib.py") == "other"


def test_report_rows_and_totals():
    counts = dict.fromkeys(host_bytecodes.AREAS, 0)
    lines = host_bytecodes.report({"cpu": {**counts, "mx_sparse/nn": 7, "torch": 5},
                                   "cuda": {**counts, "mx_sparse/_cuda": 11}}).splitlines()
    assert lines[0] == "| area | cpu | cuda |"
    assert "| mx_sparse/nn | 7 | 0 |" in lines and "| mx_sparse/_cuda | 0 | 11 |" in lines
    assert lines[-1] == "| all | 12 | 11 |"


def test_a_real_count_of_the_cpu_path_repeats():
    first, second = (host_bytecodes.run_path("cpu", 30) for _ in range(2))
    assert first == second
    assert first["mx_sparse/nn"] > 0 and first["torch"] > 0
    assert first["mx_sparse/_accelerator"] == first["mx_sparse/_cuda"] == 0
