"""``spconv.pytorch.constants``."""
import torch

PYTORCH_VERSION = [int(v) for v in torch.__version__.split("+")[0].split(".")[:3] if v.isdigit()]
TORCH_HAS_AMP = True


def is_amp_enabled():
    return torch.is_autocast_enabled()
