"""The portable C++ paths of the CPU kernels: what a CPU without AVX-512, AMX or POPCNT runs.
Run here by forcing them (MXS_CPU_PORTABLE=1, read when the extension loads) in one subprocess
and compared with a subprocess on this CPU's default paths, on the same workload: maps and
packed maps equal, float32 results equal up to summation order, bfloat16 as accurate."""
import os
import subprocess
import sys

import pytest
import torch

import mx_sparse

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOAD = r"""
import sys
import torch
from torch import nn
import mx_sparse
from mx_sparse import functional as F
from helpers import random_voxels

torch.set_num_threads(2)
shape = [20, 24, 28]
idx = random_voxels(shape, 2, density=0.08, seed=21)
out = {"kernels": mx_sparse._C.cpu_gemm_kernels()}
subm = F.build_subm_map(idx, shape, 2, [3, 3, 3], [1, 1, 1])
out_idx, conv = F.build_conv_map(idx, shape, 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
out["maps"] = [subm, out_idx, conv, F.transpose_map(conv, idx.shape[0]),
               *mx_sparse._core.op_registration.ops.pack_map(subm), *mx_sparse._core.op_registration.ops.pack_map(conv)]
for dtype in (torch.float32, torch.bfloat16):
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 16, 3, indice_key="s1"), nn.BatchNorm1d(16), nn.ReLU(),
        mx_sparse.SparseConv3d(16, 32, 3, stride=2, padding=1, indice_key="d1"), nn.BatchNorm1d(32), nn.ReLU(),
        mx_sparse.SubMConv3d(32, 32, 3, groups=2, indice_key="s2"),
        mx_sparse.SparseInverseConv3d(32, 16, 3, indice_key="d1"),
        mx_sparse.SubMConv3d(16, 8, 3, indice_key="s1")).to(dtype)
    feats = torch.randn(idx.shape[0], 4, generator=torch.Generator().manual_seed(1)).to(dtype).requires_grad_()
    y = net(mx_sparse.SparseConvTensor(feats, idx, shape, 2))
    y.features.float().square().sum().backward()
    out[str(dtype)] = [y.features.detach(), feats.grad] + [p.grad for p in net.parameters()]
torch.save(out, sys.argv[1])
"""


def run_workload(tmp_path, portable: bool):
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CPU_PORTABLE", "MXS_DISABLE_AMX")}
    if portable:
        env["MXS_CPU_PORTABLE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([HERE, env.get("PYTHONPATH", "")])
    path = tmp_path / ("portable.pt" if portable else "default.pt")
    subprocess.run([sys.executable, "-c", WORKLOAD, str(path)], check=True, env=env, timeout=300)
    return torch.load(path)


def relative_error(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm().clamp(min=1e-30))


@pytest.mark.skipif(mx_sparse._C.cpu_gemm_kernels()["float32"] != "avx512",
                    reason="this CPU runs the portable kernels by default already")
def test_portable_kernels_match_the_default_ones(tmp_path):
    portable, default = run_workload(tmp_path, True), run_workload(tmp_path, False)
    assert portable["kernels"] == {"float32": "generic", "float16": "generic", "bfloat16": "generic"}
    assert default["kernels"]["float32"] == "avx512"
    for a, b in zip(portable["maps"], default["maps"]):
        assert torch.equal(a, b)
    for a, b in zip(portable["torch.float32"], default["torch.float32"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # bfloat16: as accurate as the default path, measured against the float32 run (some reference
    # gradients are ~0, e.g. a conv bias followed by BatchNorm, so a direct comparison is noise)
    for a, b, ref in zip(portable["torch.bfloat16"], default["torch.bfloat16"], default["torch.float32"]):
        assert relative_error(a, ref) <= 1.5 * relative_error(b, ref) + 1e-3
