"""Without triton the CUDA backend still registers (the orchestration needs only torch), and the
first Triton kernel fails with an error that says what to install."""
import os
import subprocess
import sys

SCRIPT = """
import sys
sys.modules["triton"] = None          # as if triton were not installed
import torch, mx_sparse
from mx_sparse._cuda import gather_mm
assert mx_sparse._core.op_registration.has_kernel("cuda")
try:   # the CUDA primitive itself (on CPU tensors the dispatcher would pick the torch-operator fallback)
    gather_mm.gather_mm_one_group(torch.ones(2, 3), torch.ones(1, 3, 4), torch.zeros(2, 1, dtype=torch.int32))
except RuntimeError as e:
    print(e)
from mx_sparse._cuda import batch_norm_relu
try:   # the fused BatchNorm's first launch likewise
    batch_norm_relu.forward(torch.ones(4, 3), None, None, None, None, True, 0.1, 1e-5)
except RuntimeError as e:
    print(e)
"""


def test_missing_triton_names_what_to_install():
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU",)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("written in Triton, which is not installed") == 2 and "pip install triton" in proc.stdout
