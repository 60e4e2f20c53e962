"""bench/batch_norm_host.py: the fused layers it records are those of bench.host_cost's step (12 in
VoxelBackBone8x, the conv layers' channel widths), and one timed step of each implementation runs
the same calls (the NPU path's torch operators against the C++ kernels, checked equal within the
fused-BatchNorm tolerance on the first layer)."""
import torch

from bench import batch_norm_host


def test_records_the_steps_layers_and_times_each_implementation():
    shapes = batch_norm_host.step_shapes()
    assert len(shapes) == 12 and shapes[0][0] == 400
    assert [c for _, c in shapes] == [16, 16, 32, 32, 32, 64, 64, 64, 64, 64, 64, 128]
    cases = batch_norm_host._cases(shapes[:1])
    impls = batch_norm_host._implementations()
    t = cases[0]
    outs = [fns[0](t["x"], t["weight"], t["bias"], t["running_mean"].clone(), t["running_var"].clone(), True, 0.1,
                   1e-3)[0] for fns in impls.values()]
    assert len(outs) == 2 and torch.allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    for fns in impls.values():
        assert batch_norm_host.time_step(fns, cases, repeats=1, steps=1) > 0
