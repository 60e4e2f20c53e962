"""groups > 1 on NPU is the accelerator orchestration's per-group loop (mx_sparse/_accelerator/gather_mm.py,
the project's only one) around the one-group AscendC kernels: one launch per group on channel
slices, results concatenated along the output channels. Here that very loop runs with the emulated
kernels standing in for the NPU primitives (the dispatcher's primitive namespace of the
orchestration swapped for them), checked against the CPU backend's grouped ops: forward, input
gradient (autograd's grouped W^T on the transposed map) and weight gradient."""
import itertools

import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from mx_sparse._accelerator import gather_mm as orchestration
from test_gather_mm import _check, _inputs


class EmulatedGathers:
    """The two gather primitives with the schema's signatures, run by the emulated AscendC
    kernels (each call in a fresh work directory); ``calls`` counts the launches."""

    def __init__(self, binary, workdir, env):
        self.binary, self.workdir, self.env, self.calls = binary, workdir, env, []
        self._n = itertools.count()

    def _gather_mm_one_group(self, features, weight, nbr):
        self.calls.append("GatherMm")
        return ao.gather_mm(self.binary, features.contiguous(), weight.contiguous(), nbr,
                            self.workdir / f"c{next(self._n)}", self.env)[0]

    def _gather_mm_backprop_filter_one_group(self, features, grad, nbr, scale=None, shift=None):
        self.calls.append("GatherMmBackpropFilter")
        if scale is not None:      # the activated features first, as the NPU binding makes them
            features = torch.ops.mx_sparse.scale_shift_relu(features, scale, shift)
        return ao.gather_mm_backprop_filter(self.binary, features.contiguous(), grad.contiguous(), nbr,
                                            self.workdir / f"c{next(self._n)}", self.env)[0]


def transpose_grouped(w, groups):
    """[K, Cin/G, Cout] -> [K, Cout/G, Cin], each group's W[k] block transposed (kernels/schema/autograd.cpp)."""
    k, cin_g, cout = w.shape
    return w.view(k, cin_g, groups, cout // groups).permute(0, 3, 2, 1).reshape(k, cout // groups, groups * cin_g)


@pytest.mark.parametrize("groups,cin,cout", [(2, 16, 24), (4, 32, 16)])
def test_grouped_gather_mm_equals_cpu(ops_bin, scenes, tmp_path, monkeypatch, groups, cin, cout):
    ind, shape, batch = scenes["random_b2"]
    nbr = F.build_subm_map(ind, shape, batch, [3, 3, 3], [1, 1, 1])
    nbr_t = F.transpose_map(nbr, ind.shape[0])
    n = ind.shape[0]
    f, w_full, grad = _inputs(n, n, cin, cout, 27, torch.float32, seed=groups)
    w = w_full[:, :cin // groups].contiguous()          # grouped weight [K, Cin/G, Cout]
    emulated = EmulatedGathers(ops_bin, tmp_path, ao.sim_env(aic=3))
    monkeypatch.setattr(orchestration, "primitives", emulated)

    out = orchestration.gather_mm(f, w, nbr, None, groups)
    _check(out, F.gather_mm(f, w, nbr, nbr_t, groups), torch.float32)

    fr = f.clone().requires_grad_(True)
    F.gather_mm(fr, w, nbr, nbr_t, groups).backward(grad)
    gin = orchestration.gather_mm(grad, transpose_grouped(w, groups), nbr_t, nbr, groups)
    _check(gin, fr.grad, torch.float32)

    dw = orchestration.gather_mm_backprop_filter(f, grad, nbr, None, groups)
    assert dw.shape == (27, cin // groups, cout)
    _check(dw, F.gather_mm_backprop_filter(f, grad, nbr, nbr_t, groups), torch.float32)
    assert emulated.calls == ["GatherMm"] * (2 * groups) + ["GatherMmBackpropFilter"] * groups
