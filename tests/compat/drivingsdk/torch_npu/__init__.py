"""Test-only stand-in for ``torch_npu``, used by tests/compat/run_drivingsdk_tests.sh to run
DrivingSDK's own tests on CPU. Importing it gives tensors and modules an ``.npu()`` that
returns them unchanged, so the tests' "NPU" tensors stay CPU tensors and mx_sparse's CPU
kernels run; ``torch_npu.testing.testcase`` provides ``TestCase`` with torch_npu's
tolerance rule. Nothing here is part of mx_sparse."""
import torch

from . import npu, testing  # noqa: F401

__version__ = "0.0+mx_sparse-cpu-stand-in"


def _stay(self, *args, **kwargs):
    return self


torch.Tensor.npu = _stay
torch.nn.Module.npu = _stay
