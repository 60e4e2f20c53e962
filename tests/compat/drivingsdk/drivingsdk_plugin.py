"""pytest plugin of tests/compat/run_drivingsdk_tests.sh: runs DrivingSDK's sparse-convolution
tests (tests/torch/test_*sparse*conv3d*.py of an Ascend/DrivingSDK checkout) unmodified
against mx_sparse on CPU.

* ``mx_driving`` is mx_sparse's mx_driving surface (``mx_sparse.patch_mx_driving()``), with
  the module paths the tests import; ``torch_npu`` is the stand-in beside this file.
* Cases whose golden cannot fit this machine are scaled in one way: the golden builds a dense
  matrix of ``rows x K x Cin`` values (float32; rows = points for submanifold convs, and for
  strided ones points x prod(k/s) per axis, at the smallest stride the test may pick). Where
  that exceeds GOLDEN_BUDGET_BYTES, channels are first capped at CHANNEL_CAP, then the point
  count is cut until it fits. The wrapped entry points receive the case's arguments; the
  tests' data generation, golden code and assertions run unchanged. Each scaled case is
  printed with its original and used shape.
* spconv 2.3.8 is the oracle of test_sparse_inverse_conv3d.py. That test hands spconv weights
  in the layout ``[*kernel, Cout, Cin]`` (``permute(0, 1, 2, 4, 3)`` of mx_driving's), the
  layout of spconv before 2.2; spconv 2.3.8 reads ``[Cout, *kernel, Cin]`` unless its
  ``ALL_WEIGHT_IS_KRSC`` switch is off, so the runner turns it off (spconv's CPU build runs
  only its native algorithm, which still supports that layout). spconv's CPU convolutions
  run with one torch thread: with more its CPU scatter-add races and returns wrong sums.
"""
import functools
import math

import torch

GOLDEN_BUDGET_BYTES = 1 << 30
CHANNEL_CAP = 256
SCALED = []   # (test, original, used) printed in the terminal summary


def _golden_rows(points, kernel, strides):
    """Output rows of the golden's dense matrix: the points (submanifold, strides None), or
    for a strided conv points x prod(k/s), at the stride giving the most rows."""
    if strides is None:
        return points
    return points * max(math.prod(k / s for k, s in zip(kernel, st)) for st in strides)


def _scale(where, points, cin, cout, kernel, strides=None):
    """(points, cin, cout) fitted to the budget."""
    kvol = math.prod(kernel)

    def need(p, c):
        return _golden_rows(p, kernel, strides) * kvol * c * 4

    if need(points, cin) <= GOLDEN_BUDGET_BYTES:
        return points, cin, cout
    new_cin, new_cout = min(cin, CHANNEL_CAP), min(cout, CHANNEL_CAP)
    new_points = points
    if need(points, new_cin) > GOLDEN_BUDGET_BYTES:
        new_points = int(points * GOLDEN_BUDGET_BYTES / need(points, new_cin))
    SCALED.append((where, f"points {points}, channels {cin}->{cout}, kernel {list(kernel)}",
                   f"points {new_points}, channels {new_cin}->{new_cout}",
                   f"golden matrix {need(points, cin) / 2**30:.1f} GiB"))
    print(f"[drivingsdk runner] scaled {where}: points {points} -> {new_points}, channels {cin}->{cout} -> "
          f"{new_cin}->{new_cout} (golden matrix {need(points, cin) / 2**30:.1f} GiB > "
          f"{GOLDEN_BUDGET_BYTES / 2**30:.0f} GiB)")
    return new_points, new_cin, new_cout


def _cube(k):
    return list(k) if isinstance(k, (list, tuple)) else [k] * 3


def _wrap_sparse_conv3d(mod):
    """test_sparse_conv3d.get_output(num_points, batch_size, in_channels, out_channels,
    kernel_size, spatial_shape, dtype, stride, padding)."""
    inner = mod.get_output

    @functools.wraps(inner)
    def get_output(num_points, batch_size, in_channels, out_channels, kernel_size, spatial_shape, dtype, stride,
                   padding):
        p, cin, cout = _scale(f"test_sparse_conv3d {list(spatial_shape)} stride {list(stride)} {dtype}",
                              sum(num_points), in_channels, out_channels, _cube(kernel_size), (tuple(stride),))
        if p != sum(num_points):
            num_points = [p]
        return inner(num_points, batch_size, cin, cout, kernel_size, spatial_shape, dtype, stride, padding)
    mod.get_output = get_output


def _wrap_subm_forward(mod, name):
    """test_subm_sparse_conv3d.get_output / test_subm_sparse_conv3d_grad.single_benchmark_get_output
    (num_points, batch_size, in_channels, out_channels, kernel_size, spatial_shape, dtype)."""
    inner = getattr(mod, name)

    @functools.wraps(inner)
    def wrapped(num_points, batch_size, in_channels, out_channels, kernel_size, spatial_shape, dtype):
        p, cin, cout = _scale(f"{mod.__name__} {list(spatial_shape)} k{kernel_size} {dtype}", sum(num_points),
                              in_channels, out_channels, _cube(kernel_size))
        if p != sum(num_points):
            num_points = [p]
        return inner(num_points, batch_size, cin, cout, kernel_size, spatial_shape, dtype)
    setattr(mod, name, wrapped)


def _wrap_sparse_conv3d_grad(mod):
    """TestSparseConv3dGrad.random_input_generator(self, num_points, spatial_shape, in_channels,
    out_channels, kernel_size, dtype, seed); the test picks the stride afterwards."""
    cls = mod.TestSparseConv3dGrad
    inner = cls.random_input_generator

    @functools.wraps(inner)
    def random_input_generator(self, num_points, spatial_shape, in_channels, out_channels, kernel_size, dtype,
                               seed=42):
        strides = [tuple(s) for s in self.stride]
        p, cin, cout = _scale(f"test_sparse_conv3d_grad {list(spatial_shape)} k{list(kernel_size)} {dtype}",
                              num_points, in_channels, out_channels, list(kernel_size), strides)
        return inner(self, p, spatial_shape, cin, cout, kernel_size, dtype, seed)
    cls.random_input_generator = random_input_generator


WRAPPERS = {
    "test_sparse_conv3d": _wrap_sparse_conv3d,
    "test_subm_sparse_conv3d": lambda m: _wrap_subm_forward(m, "get_output"),
    "test_subm_sparse_conv3d_grad": lambda m: _wrap_subm_forward(m, "single_benchmark_get_output"),
    "test_sparse_conv3d_grad": _wrap_sparse_conv3d_grad,
}


def _spconv_oracle():
    try:
        import spconv.pytorch.conv as spconv_conv
        import spconv.pytorch.ops as spconv_ops
    except ImportError:
        return
    spconv_conv.ALL_WEIGHT_IS_KRSC = spconv_ops.ALL_WEIGHT_IS_KRSC = False   # pre-2.2 layout [*k, Cout, Cin]
    inner = spconv_conv.SparseConvolution.forward

    @functools.wraps(inner)
    def forward(self, *args, **kwargs):
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return inner(self, *args, **kwargs)
        finally:
            torch.set_num_threads(n)
    spconv_conv.SparseConvolution.forward = forward


def pytest_configure(config):
    import mx_sparse
    mx_sparse.patch_mx_driving()
    _spconv_oracle()


def pytest_collection_modifyitems(session, config, items):
    done = set()
    for item in items:
        mod = getattr(item, "module", None)
        name = getattr(mod, "__name__", "")
        if name in WRAPPERS and name not in done:
            WRAPPERS[name](mod)
            done.add(name)


def pytest_terminal_summary(terminalreporter):
    if SCALED:
        terminalreporter.write_sep("-", f"cases scaled to fit (golden dense matrix <= "
                                        f"{GOLDEN_BUDGET_BYTES / 2**30:.0f} GiB, channels <= {CHANNEL_CAP})")
        for where, original, used, why in SCALED:
            terminalreporter.write_line(f"{where}: {original} -> {used} ({why})")
