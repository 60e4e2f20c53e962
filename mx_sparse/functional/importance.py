"""Normalisation and importance weights of a sparse convolution, as Open3D-ML defines them.

``weighted_gather_mm`` is ``gather_mm`` (``out[m] = sum_k features[nbr[m, k]] @ weight[k]``)
with four optional weightings:

- ``inp_importance [N]``: input row ``i`` is multiplied by ``inp_importance[i]``;
- ``nbr_importance [M, K]``: the contribution of ``(m, k)`` is multiplied by ``nbr_importance[m, k]``
  (entries where ``nbr`` is -1 are ignored);
- ``normalize``: ``"output"`` (or ``True``) divides output row ``m`` by the summed neighbour
  importance of its contributions (their number without ``nbr_importance``); ``"input"`` divides
  each contribution of input ``i`` by the summed neighbour importance of all contributions of
  ``i`` (their number without ``nbr_importance``) -- Open3D's ``sparse_conv`` and
  ``sparse_conv_transpose`` respectively. A sum of zero leaves its row undivided (Open3D does
  the same); ``inp_importance`` does not enter either sum.
- ``out_importance [M]``: output row ``m`` is multiplied by ``out_importance[m]`` (last).

Written once in torch operators around the schema op ``gather_mm``, so every backend (the C++
CPU kernels, the CUDA and NPU orchestration) runs it, and autograd gives the gradients of
features, weight and every importance. Without ``nbr_importance`` the features are scaled and the
map is used as it is; with it, one row per active pair ``(m, k)`` is gathered and scaled (the pair
map ``nbr_pair[m, k] = p``), which costs ``P x Cin`` memory for ``P`` pairs.
"""
from typing import Optional, Union

import torch

from .._core.op_registration import ops

NORMALIZE_MODES = ("none", "output", "input")


def normalize_mode(normalize: Union[bool, str]) -> str:
    """``False``/``True`` or one of ``NORMALIZE_MODES``, as a mode name."""
    if normalize is False or normalize is True:
        return "output" if normalize else "none"
    if normalize not in NORMALIZE_MODES:
        raise ValueError(f"normalize: expected True, False or one of {NORMALIZE_MODES}, got {normalize!r}")
    return normalize


def _check_vector(name: str, value: Optional[torch.Tensor], length: int, what: str, features: torch.Tensor):
    if value is None:
        return
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a tensor or None, got {type(value).__name__}")
    if value.dim() != 1 or value.shape[0] != length:
        raise ValueError(f"{name}: expected shape [{length}] (one value per {what}), got {list(value.shape)}")
    _check_float(name, value, features)


def _check_float(name: str, value: torch.Tensor, features: torch.Tensor):
    if not value.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {value.dtype}")
    if value.device != features.device:
        raise ValueError(f"{name}: expected a tensor on {features.device} (as features), got {value.device}")


def check_importance(features: torch.Tensor, nbr: torch.Tensor, inp_importance: Optional[torch.Tensor],
                     nbr_importance: Optional[torch.Tensor], out_importance: Optional[torch.Tensor]):
    """Shapes, dtypes and devices of the importance arguments; each message names its argument."""
    _check_vector("inp_importance", inp_importance, features.shape[0], "input row of features", features)
    _check_vector("out_importance", out_importance, nbr.shape[0], "output row of nbr", features)
    if nbr_importance is not None:
        if not isinstance(nbr_importance, torch.Tensor):
            raise TypeError(f"nbr_importance: expected a tensor or None, got {type(nbr_importance).__name__}")
        if tuple(nbr_importance.shape) != tuple(nbr.shape):
            raise ValueError(f"nbr_importance: expected shape {list(nbr.shape)} (that of nbr), "
                             f"got {list(nbr_importance.shape)}")
        _check_float("nbr_importance", nbr_importance, features)


def _safe_divisor(total: torch.Tensor) -> torch.Tensor:
    """``total`` with zeros replaced by one: a row whose sum is zero stays undivided."""
    return torch.where(total != 0, total, torch.ones_like(total))


def _pair_rows(features, nbr, active, nbr_importance, inp_importance, input_divisor):
    """One scaled feature row per active pair and the map that selects them: ``rows[p]`` is the
    input of pair ``p`` times its weights, ``nbr_pair[m, k] = p`` (pairs numbered row-major)."""
    flat = active.reshape(-1)
    number = torch.cumsum(flat.to(torch.int64), 0) - 1
    nbr_pair = torch.where(flat, number, torch.full_like(number, -1)).reshape(nbr.shape).to(nbr.dtype)
    src = nbr.reshape(-1)[flat].long()
    scale = nbr_importance.reshape(-1)[flat].to(features.dtype)
    if inp_importance is not None:
        scale = scale * inp_importance.to(features.dtype)[src]
    if input_divisor is not None:
        scale = scale / input_divisor[src]
    return features[src] * scale[:, None], nbr_pair


def weighted_gather_mm(features: torch.Tensor, weight: torch.Tensor, nbr: torch.Tensor,
                       nbr_t: Optional[torch.Tensor] = None, groups: int = 1, *,
                       inp_importance: Optional[torch.Tensor] = None,
                       nbr_importance: Optional[torch.Tensor] = None,
                       out_importance: Optional[torch.Tensor] = None,
                       normalize: Union[bool, str] = False, symmetric: bool = False) -> torch.Tensor:
    """``gather_mm`` with importance weights and normalisation (see the module docstring).
    ``nbr_t`` and ``symmetric`` (as for ``gather_mm``) are used only on the path without
    ``nbr_importance``."""
    mode = normalize_mode(normalize)
    check_importance(features, nbr, inp_importance, nbr_importance, out_importance)
    active = nbr >= 0
    if nbr_importance is None:
        pair_weight = active.to(features.dtype)
    else:
        pair_weight = torch.where(active, nbr_importance.to(features.dtype), torch.zeros((), dtype=features.dtype,
                                                                                         device=features.device))
    input_divisor = None
    if mode == "input":   # each input's summed pair weight over all the outputs it reaches
        input_divisor = _safe_divisor(torch.zeros(features.shape[0], dtype=features.dtype, device=features.device)
                                      .index_add(0, nbr[active].long(), pair_weight[active]))
    if nbr_importance is None:
        scaled = features
        if inp_importance is not None:
            scaled = scaled * inp_importance.to(features.dtype)[:, None]
        if input_divisor is not None:
            scaled = scaled / input_divisor[:, None]
        out = ops.gather_mm(scaled, weight, nbr, nbr_t, groups, symmetric)
    else:
        rows, nbr_pair = _pair_rows(features, nbr, active, nbr_importance, inp_importance, input_divisor)
        out = ops.gather_mm(rows, weight, nbr_pair, None, groups)
    if mode == "output":
        out = out / _safe_divisor(pair_weight.sum(1))[:, None]
    if out_importance is not None:
        out = out * out_importance.to(out.dtype)[:, None]
    return out
