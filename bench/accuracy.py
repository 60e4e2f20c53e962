"""Checks, once per workload, that mx_sparse and spconv compute the same function before
they are timed. spconv at 1 thread (its correct shipped configuration) is the oracle.
Output rows are matched by voxel coordinates (the libraries may order strided-conv
outputs differently)."""
from typing import Dict, List

import torch

from .timing import Variant, make_tensor


def _order(indices: torch.Tensor) -> torch.Tensor:
    """Permutation sorting voxels by (batch, *spatial)."""
    idx = indices.long()
    key = torch.zeros(idx.shape[0], dtype=torch.long, device=idx.device)
    for c in range(idx.shape[1]):
        key = key * (int(idx[:, c].max()) + 1 if idx.shape[0] else 1) + idx[:, c]
    return torch.argsort(key)


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    if a.shape != ref.shape:
        return float("inf")
    scale = ref.abs().max().item()
    return (a - ref).abs().max().item() / (scale if scale > 0 else 1.0)


def _first_conv_weight(net):
    for m in net.modules():
        w = getattr(m, "weight", None)
        if w is not None and w.dim() == 5:
            return w
    raise LookupError("no 3D convolution weight")


def _outputs(net, v: Variant, inp, grad_seed: int = 0):
    """Eval-mode output; the input-feature gradient and the first conv layer's weight
    gradient (as ``[*k, Cin, Cout]``) of a fixed random linear loss on it; and the
    train-mode output. Rows in coordinate-sorted order. (Gradients are taken in eval mode:
    through train-mode BatchNorm they are ill-conditioned in fp32, and both libraries
    then differ from a float64 reference by about 1e-2.)"""
    v.activate()
    net.eval()
    net.zero_grad(set_to_none=True)
    x = make_tensor(v.lib, inp, requires_grad=True)
    y = net(x)
    order = _order(y.indices)
    g = torch.Generator().manual_seed(grad_seed)
    w = torch.randn(y.features.shape, generator=g)
    (y.features[order] * w).sum().backward()
    wg = _first_conv_weight(net).grad
    if v.lib == "spconv":   # [Cout, *k, Cin] -> [*k, Cin, Cout]
        wg = wg.permute(*range(1, wg.dim()), 0)
    out = dict(forward=y.features[order].detach(), input_grad=x.features.grad.clone(), weight_grad=wg.clone())
    net.train()
    with torch.no_grad():
        y = net(make_tensor(v.lib, inp))
    out["train"] = y.features[_order(y.indices)]
    return out


def check(nets: Dict[str, torch.nn.Module], vs: List[Variant], inp) -> Dict[str, Dict]:
    """Max relative error (max |a - ref| / max |ref|) of every variant against spconv-1t."""
    state = {lib: {k: t.clone() for k, t in net.state_dict().items()} for lib, net in nets.items()}

    def outputs(v):
        got = _outputs(nets[v.lib], v, inp)
        nets[v.lib].load_state_dict(state[v.lib])   # undo the train step's BatchNorm running-stat update
        return got

    oracle = next((v for v in vs if v.lib == "spconv" and v.threads == 1), None)
    if oracle is None:   # no spconv (non-CPU device or --no-spconv): nothing to compare against
        return {}
    ref = outputs(oracle)
    return {v.name: {k: _rel(got[k], ref[k]) for k in ref}
            for v in vs if v is not oracle for got in [outputs(v)]}
