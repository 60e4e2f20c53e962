"""groups > 1 on NPU is a composition of the one-group AscendC kernels (kernels/ascend/binding/
mx_sparse_npu.cpp, per_group): one launch per group on channel slices, results concatenated along
the output channels. There is no NPU here, so the same slicing is written below around the
emulated kernels and checked against the CPU backend's grouped ops: forward, input gradient (the
autograd's grouped W^T on the transposed map) and weight gradient."""
import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from test_gather_mm import _check, _inputs


def gather_mm_grouped(binary, features, weight, nbr, groups, workdir, env):
    """out[:, g*Cout_g:(g+1)*Cout_g] = gather_mm(features[:, g*Cin_g:...], weight[:, :, g*Cout_g:...])."""
    cin_g, cout_g = features.shape[1] // groups, weight.shape[2] // groups
    outs = [ao.gather_mm(binary, features[:, g * cin_g:(g + 1) * cin_g].contiguous(),
                         weight[:, :, g * cout_g:(g + 1) * cout_g].contiguous(), nbr, workdir / f"g{g}", env)[0]
            for g in range(groups)]
    return torch.cat(outs, 1)


def backprop_filter_grouped(binary, features, grad, nbr, groups, workdir, env):
    """dW[:, :, g*Cout_g:(g+1)*Cout_g] = backprop_filter(features[:, g*Cin_g:...], grad[:, g*Cout_g:...])."""
    cin_g, cout_g = features.shape[1] // groups, grad.shape[1] // groups
    parts = [ao.gather_mm_backprop_filter(binary, features[:, g * cin_g:(g + 1) * cin_g].contiguous(),
                                          grad[:, g * cout_g:(g + 1) * cout_g].contiguous(), nbr,
                                          workdir / f"g{g}", env)[0]
             for g in range(groups)]
    return torch.cat(parts, 2)


def transpose_grouped(w, groups):
    """[K, Cin/G, Cout] -> [K, Cout/G, Cin], each group's W[k] block transposed (kernels/ops/autograd.cpp)."""
    k, cin_g, cout = w.shape
    return w.view(k, cin_g, groups, cout // groups).permute(0, 3, 2, 1).reshape(k, cout // groups, groups * cin_g)


@pytest.mark.parametrize("groups,cin,cout", [(2, 16, 24), (4, 32, 16)])
def test_grouped_gather_mm_equals_cpu(ops_bin, scenes, tmp_path, groups, cin, cout):
    ind, shape, batch = scenes["random_b2"]
    nbr = F.build_subm_map(ind, shape, batch, [3, 3, 3], [1, 1, 1])
    nbr_t = F.transpose_map(nbr, ind.shape[0])
    n = ind.shape[0]
    f, w_full, grad = _inputs(n, n, cin, cout, 27, torch.float32, seed=groups)
    w = w_full[:, :cin // groups].contiguous()          # grouped weight [K, Cin/G, Cout]
    env = ao.sim_env(aic=3)

    out = gather_mm_grouped(ops_bin, f, w, nbr, groups, tmp_path / "fwd", env)
    _check(out, F.gather_mm(f, w, nbr, nbr_t, groups), torch.float32)

    fr = f.clone().requires_grad_(True)
    F.gather_mm(fr, w, nbr, nbr_t, groups).backward(grad)
    gin = gather_mm_grouped(ops_bin, grad, transpose_grouped(w, groups), nbr_t, groups, tmp_path / "bpi", env)
    _check(gin, fr.grad, torch.float32)

    dw = backprop_filter_grouped(ops_bin, f, grad, nbr, groups, tmp_path / "bpf", env)
    assert dw.shape == (27, cin // groups, cout)
    _check(dw, F.gather_mm_backprop_filter(f, grad, nbr, nbr_t, groups), torch.float32)
