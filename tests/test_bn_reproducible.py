"""Bitwise run-to-run reproducibility of the fused BatchNorm+ReLU kernels (forward statistics and
backward) and of a whole training step, on every CPU kernel build this machine can run: the
default (AVX-512 where the CPU has it), AMX off (MXS_DISABLE_AMX), and the portable C++ build
(MXS_CPU_PORTABLE). Each build runs in its own interpreter: the switches are read when the
extension loads.

Repeats on identical inputs enough times to catch a 1 % event (issue 28: about 1 % of repeated
steps gave gradients differing in the last bits): 1,000 repeats miss a 1 % event with
probability 0.99^1000 < 5e-5; the whole step 10 times. The slow-marked variant runs 10,000 repeats
and 1,000 steps. On this project's 2-core machine the reported event did not reproduce on main
(see /work/notes/reliability.md): these tests guard the property, they did not catch a defect."""
import json
import os
import subprocess
import sys

import pytest

REPEAT_BN = r"""
import json, sys, torch
from mx_sparse._op_registration import ops
reps = int(sys.argv[1])
torch.manual_seed(0)
out = {}
for dtype in (torch.float32, torch.bfloat16):
    # 1,100 rows: two full 512-row blocks and a partial one, so several threads share the sums
    x = (torch.randn(1100, 24) * 2 + 0.3).to(dtype)
    dy = (torch.randn(1100, 24) * 1e-3).to(dtype)
    gamma, beta = (torch.rand(24) + 0.5).to(dtype), (torch.randn(24) * 0.1).to(dtype)

    def once():
        rm, rv = torch.zeros(24, dtype=dtype), torch.ones(24, dtype=dtype)
        y, mean, invstd, scale, shift = ops.batch_norm_relu_forward(x, gamma, beta, rm, rv, True, 0.1, 1e-3)
        grads = ops.batch_norm_relu_backward(dy, x, mean, invstd, gamma, scale, shift, True)
        return [y, mean, invstd, scale, shift, rm, rv, *grads]

    ref = once()
    differing = sum(not all(torch.equal(a, b) for a, b in zip(once(), ref)) for _ in range(reps))
    out[str(dtype)] = differing
print(json.dumps(out))
"""

REPEAT_STEP = r"""
import json, sys, torch, mx_sparse
from mx_sparse.models import VoxelBackBone8x
reps, n = int(sys.argv[1]), 1500
shape = [41, 96, 96]
g = torch.Generator().manual_seed(0)
keys = torch.randperm(2 * 41 * 96 * 96, generator=g)[:n].sort().values
cols = []
for s in reversed(shape):
    cols.append(keys % s)
    keys = keys // s
idx = torch.stack([keys] + cols[::-1], 1).int()
f = torch.randn(n, 4, generator=g)
torch.manual_seed(0)
model = VoxelBackBone8x(4).train()
state = {k: v.clone() for k, v in model.state_dict().items()}
weight = None

def step():
    global weight
    model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    x = mx_sparse.SparseConvTensor(f.clone().requires_grad_(), idx, shape, 2)
    y = model(x)
    if weight is None:
        weight = torch.randn(y.features.shape, generator=torch.Generator().manual_seed(1))
    (y.features * weight).sum().backward()
    return [y.features.detach(), x.features.grad] + [p.grad for p in model.parameters()] + list(model.buffers())

ref = step()
print(json.dumps({"steps": sum(not all(torch.equal(a, b) for a, b in zip(step(), ref)) for _ in range(reps))}))
"""


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next(line for line in f if line.startswith("flags")).split())
    except (OSError, StopIteration):
        return set()


def builds():
    """(name, environment) of each kernel build this CPU runs; AMX skipped where absent."""
    flags = cpu_flags()
    out = [pytest.param("portable", {"MXS_CPU_PORTABLE": "1"}, id="portable")]
    out.append(pytest.param("avx512", {"MXS_DISABLE_AMX": "1"}, id="avx512",
                            marks=pytest.mark.skipif("avx512f" not in flags, reason="this CPU has no AVX-512")))
    out.append(pytest.param("amx", {}, id="amx",
                            marks=pytest.mark.skipif("amx_bf16" not in flags,
                                                     reason="this CPU has no AMX-BF16 (the AMX build runs only there)")))
    return out


def run(code, reps, env):
    full = {k: v for k, v in os.environ.items() if k not in ("MXS_CPU_PORTABLE", "MXS_DISABLE_AMX")}
    full.update(env)
    p = subprocess.run([sys.executable, "-c", code, str(reps)], capture_output=True, text=True, env=full,
                       timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,env", builds())
def test_fused_bn_bitwise_over_1000_repeats(name, env):
    assert run(REPEAT_BN, 1000, env) == {"torch.float32": 0, "torch.bfloat16": 0}


@pytest.mark.parametrize("name,env", builds())
def test_training_step_bitwise_over_10_repeats(name, env):
    assert run(REPEAT_STEP, 10, env) == {"steps": 0}


@pytest.mark.slow
@pytest.mark.parametrize("name,env", builds())
def test_fused_bn_bitwise_over_10000_repeats(name, env):
    assert run(REPEAT_BN, 10000, env) == {"torch.float32": 0, "torch.bfloat16": 0}


@pytest.mark.slow
@pytest.mark.parametrize("name,env", builds())
def test_training_step_bitwise_over_1000_repeats(name, env):
    assert run(REPEAT_STEP, 1000, env) == {"steps": 0}
