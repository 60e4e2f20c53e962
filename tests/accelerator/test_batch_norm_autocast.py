"""Under torch.autocast the accelerators run the fused BatchNorm+ReLU (not torch's modules): on
CPU tensors through the CUDA path (MXS_CUDA_ON_CPU=1, Triton kernels interpreted) and the NPU path
(MXS_NPU_ON_CPU=1, torch operators), each in a subprocess (the switches are read at import). A
SparseSequential conv-BN-ReLU-conv-BN-ReLU network under autocast(bfloat16): the fused ops are
called, the features stay bfloat16, and the output and every gradient match the same network with
torch's BatchNorm and ReLU under autocast within bfloat16's rounding."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r'''
import collections, torch, mx_sparse
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
calls = collections.Counter()

class Count(TorchDispatchMode):
    """the fused ops' calls as the dispatcher sees them (the NPU path's kernels are C++)"""
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name() in ("mx_sparse::batch_norm_relu_forward", "mx_sparse::batch_norm_relu_backward"):
            calls[func.name().rsplit("_", 1)[1]] += 1
        return func(*args, **(kwargs or {}))

def run(fused):
    torch.manual_seed(0)
    conv = lambda cin: mx_sparse.SubMConv3d(cin, 16, 3, bias=False, indice_key="a")
    net = mx_sparse.SparseSequential(conv(4), nn.BatchNorm1d(16), nn.ReLU(), conv(16), nn.BatchNorm1d(16), nn.ReLU())
    g = torch.Generator().manual_seed(1)
    idx = torch.unique(torch.randint(0, 12, (400, 3), generator=g), dim=0)
    idx = torch.cat([torch.zeros(len(idx), 1, dtype=idx.dtype), idx], 1).int()
    feats = torch.randn(len(idx), 4, generator=g)
    mx_sparse.SparseSequential.fuse_bn_relu = fused
    with Count():
        with torch.autocast("cpu", torch.bfloat16):
            out = net(mx_sparse.SparseConvTensor(feats, idx, [12, 12, 12], 1))
        assert out.features.dtype == torch.bfloat16, out.features.dtype
        out.features.float().square().sum().backward()
    return [out.features.float()] + [p.grad for p in net.parameters()] + [net[1].running_mean, net[4].running_var]

fused = run(True)
assert calls["forward"] == 2 and calls["backward"] == 2, calls
reference = run(False)
assert calls["forward"] == 2, calls
for i, (a, b) in enumerate(zip(fused, reference)):
    err = ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()
    assert err < 3e-2, (i, err)
print("OK", dict(calls))
'''


@pytest.mark.parametrize("switch", ["MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU"])
def test_fused_batch_norm_runs_under_autocast(switch):
    if switch == "MXS_NPU_ON_CPU":
        from mx_sparse.runtime import ascend
        if not ascend.emulator_available():
            pytest.skip("the AscendC emulator needs the kernel sources and a C++ compiler")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", **{switch: "1"})
    env.pop("MXS_NPU_ON_CPU" if switch == "MXS_CUDA_ON_CPU" else "MXS_CUDA_ON_CPU", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]
