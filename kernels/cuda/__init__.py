"""mx_sparse's CUDA backend (installed as ``mx_sparse._cuda`` from kernels/cuda/).

Compute kernels in Triton (gather_kernels.py: the output-stationary gather-GEMM and the
filter gradient), map builders, packed maps and the fused BatchNorm+ReLU from torch's own
CUDA operators, registered under the CUDA dispatch key by registration.py (and, with
``MXS_CUDA_ON_CPU=1``, for CPU tensors instead of the C++ CPU kernels). Importing this
package does not import triton; the first kernel launch does. See docs/en/cuda.md.
"""
