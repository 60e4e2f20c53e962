"""mx_sparse's CUDA primitives (``mx_sparse._cuda``): the Triton
kernels of the two gathers (gather_kernels.py: the output-stationary gather-GEMM and the filter
gradient), their tile choice (tiles.py) and launch code (launch.py, gather_mm.py). Everything
else on CUDA tensors is the device-neutral accelerator orchestration (mx_sparse/_accelerator,
``mx_sparse._accelerator``), which registers these primitives for the CUDA key (and, with
``MXS_CUDA_ON_CPU=1``, for CPU tensors under Triton's interpreter). Importing this package does
not import triton; the first kernel launch does. See docs/en/cuda.md.
"""
