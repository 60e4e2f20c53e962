"""pytest plugin of tests/compat/run_spconv_tests.sh: runs spconv's own tests (test/test_conv.py,
test/test_multi_impl.py of a traveller59/spconv checkout) unmodified against mx_sparse on CPU.

* ``spconv`` is mx_sparse's spconv-2.x surface (``mx_sparse.patch_spconv()``, which also
  provides ``spconv.test_utils``), patched before the test modules are imported.
* The tests place everything on ``cuda:0`` (their reference is torch's dense Conv3d on the same
  device). Where this torch has no CUDA, the device is CPU instead: each test module sees a
  ``torch`` whose ``device("cuda...")`` is the CPU device, and ``Tensor.cuda()`` /
  ``Module.cuda()`` leave tensors where they are. Nothing else of the tests changes: their data,
  reference, tolerances and assertions run as written.
"""
import sys
import types

import torch

import mx_sparse

mx_sparse.patch_spconv()
_REAL_DEVICE = torch.device


def _device(spec, *args):
    if not torch.cuda.is_available() and str(spec).startswith("cuda"):
        return _REAL_DEVICE("cpu")
    return _REAL_DEVICE(spec, *args)


class _TorchOnCpu(types.ModuleType):
    """torch as a test module sees it: every attribute is torch's, but device() maps CUDA to CPU."""

    def __getattr__(self, name):
        return getattr(torch, name)


def pytest_collection_modifyitems(session, config, items):
    if torch.cuda.is_available():
        return
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    proxy = _TorchOnCpu("torch")
    proxy.device = _device
    for module in {item.module for item in items if getattr(item, "module", None) is not None}:
        if getattr(module, "torch", None) is torch:
            module.torch = proxy


def pytest_report_header(config):
    where = "CUDA" if torch.cuda.is_available() else "CPU (cuda:0 mapped to cpu)"
    return f"spconv's tests on mx_sparse {mx_sparse.__version__} via patch_spconv(); device: {where}; " \
           f"spconv resolves to {sys.modules['spconv'].__name__}"
