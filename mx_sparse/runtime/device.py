"""Choice of the device to run on: the best one present for which this build has kernels."""
import torch

from .._core.op_registration import has_kernel


def best_device() -> torch.device:
    """NPU if torch_npu and our NPU kernels are present, else CUDA likewise, else CPU."""
    try:
        import torch_npu  # noqa: F401
        if torch.npu.is_available() and has_kernel("npu"):
            return torch.device("npu")
    except ImportError:
        pass
    if torch.cuda.is_available() and has_kernel("cuda"):
        return torch.device("cuda")
    return torch.device("cpu")
