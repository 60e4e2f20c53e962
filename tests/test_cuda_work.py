"""bench/cuda_work.py's report: per-layer ratios and the exact last line the issue asks for
(the whole-scene run takes about a minute, so it is not run here; the counts it uses are
tested in tests/cuda/test_interpreted_kernels.py::test_executed_steps_match_the_schedule)."""
import re

from bench import cuda_work


def test_report_last_line_and_layer_ratios():
    table = {"conv1": {"fwd": (2_000_000_000, 3_000_000_000), "dW": (2_000_000_000, 2_000_000_000)},
             "conv2": {"fwd": (1_000_000_000, 1_500_000_000), "dX": (1_000_000_000, 1_000_000_000),
                       "dW": (1_000_000_000, 2_500_000_000)}}
    counts = {"torch_kernels": 3136, "triton_launches": 47, "host_reads": 32, "voxels": 10}
    lines = cuda_work.report("kitti_b1", table, counts).splitlines()
    assert lines[-1] == ("step: useful_gmac=7.000 issued_gmac=10.000 ratio=1.43 torch_kernels=3136 "
                         "triton_launches=47 host_reads=32")
    assert re.fullmatch(r"step: useful_gmac=[\d.]+ issued_gmac=[\d.]+ ratio=\d+\.\d\d torch_kernels=\d+ "
                        r"triton_launches=\d+ host_reads=\d+", lines[-1])
    conv1 = next(line for line in lines if line.startswith("| conv1 "))
    assert "2.000 / 3.000 (1.50)" in conv1 and conv1.endswith("| 1.25 |") and "| - |" in conv1


def test_the_input_gradient_read_in_place_counts_as_dx():
    """The input gradient's gather on the layer's own weight read transposed (_gather_mm_transposed,
    round 4's eighth session) is a dX call with the gather's channels (Cout in, Cin out), as the
    call on the transposed copy was; the filter's calls stay dW."""
    import torch
    calls = cuda_work.Calls()
    nbr = torch.zeros((5, 27), dtype=torch.int32)
    grad, weight = torch.zeros(7, 16), torch.zeros(27, 8, 16)     # the layer: Cin 8, Cout 16
    assert calls.wrap(cuda_work.TRANSPOSED, lambda *a: "ran")(grad, weight, nbr, True) == "ran"
    calls.wrap(cuda_work.FILTER, lambda *a: None)(torch.zeros(9, 8), grad, nbr)
    assert [(kind, rows, cin, cout) for kind, _, rows, cin, cout, _ in calls.backward] == [("dX", 7, 16, 8),
                                                                                           ("dW", 9, 8, 16)]
