"""bench/op_call_cost.py: argument handling, the report's rows and differences (hand-made figures), and
(slow) one real run in its own MXS_CUDA_ON_CPU=1 interpreter whose table has a row per op with positive
times and the differences of the printed columns, and whose step counts name the gathers."""
import re

import pytest

from bench import op_call_cost


def test_arguments():
    assert op_call_cost.parse([]).loops == 2000 and op_call_cost.parse(["--loops", "5"]).loops == 5
    for bad in (["--loops", "0"], ["--loops", "x"]):
        with pytest.raises(SystemExit):
            op_call_cost.parse(bad)


def test_report_rows_and_differences():
    r = {"voxels": 40, "channels": 16, "loops": 3,
         "ops": {"gather_mm": {"dispatcher_us": 15.25, "direct_us": 12.0},
                 "scale_shift_relu": {"dispatcher_us": 8.0, "direct_us": 6.75}},
         "allocation": {"two_empty_us": 2.0, "empty_unbind_us": 2.5},
         "step_op_calls": {"gather_mm": 23, "_gather_mm_one_group": 23, "build_subm_map": 4}}
    lines = op_call_cost.report(r).splitlines()
    assert lines[0].startswith("scene: 40 voxels, 16 channels") and lines[0].endswith("loops of 3 calls")
    assert lines[3] == "| gather_mm | 15.2 | 12.0 | 3.2 |"
    assert lines[4] == "| scale_shift_relu | 8.0 | 6.8 | 1.2 |"
    assert lines[5] == "allocation: two [C] float64 2.00 us, one [2, C] + unbind 2.50 us"
    assert lines[6] == ("op calls per training step: _gather_mm_one_group=23, gather_mm=23, build_subm_map=4; "
                        "total=50")


ROW = re.compile(r"\| (?P<op>\w+) \| (?P<through>[\d.]+) \| (?P<direct>[\d.]+) \| (?P<diff>-?[\d.]+) \|")


@pytest.mark.slow
def test_a_real_run(capsys):
    """(~30 s on a loaded 2-core machine: the map kernels' first run in Triton's interpreter)"""
    op_call_cost.main(["--loops", "20"])
    out = capsys.readouterr().out.splitlines()
    rows = [ROW.fullmatch(line) for line in out[3:10]]
    assert all(rows) and {m["op"] for m in rows} >= {"gather_mm", "_gather_mm_one_group", "batch_norm_relu_forward"}
    for m in rows:
        assert float(m["through"]) > 0 and float(m["direct"]) > 0
        assert abs(float(m["through"]) - float(m["direct"]) - float(m["diff"])) <= 0.11
    calls = dict(kv.split("=") for kv in out[-1].split(": ", 1)[1].replace("; ", ", ").split(", "))
    assert int(calls["gather_mm"]) > 0 and int(calls["total"]) == sum(int(v) for k, v in calls.items() if k != "total")
