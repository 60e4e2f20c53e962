"""mx_sparse's accelerator orchestration (``mx_sparse._accelerator``): the one device-neutral implementation of every mx_sparse op for CUDA
and NPU tensors, written with torch operators around five device primitives (internal schema
ops, kernels/schema/schema.cpp) that each device supplies -- CUDA its Triton kernels (mx_sparse/_cuda),
the NPU its AscendC kernels (kernels/ascend/binding), any device the torch-operator fallbacks
of fallback.py. registration.py says which dispatch key gets what. See docs/en/architecture.md.
"""
# The contract's Python face (argument checks and bounds, the C++ messages of kernels/contract/);
# the one import of it in this package: its modules take it as ``from . import op_args``.
from .._core import contract as op_args  # noqa: F401
