"""The CUDA backend's only reads of device values by the host.

A read waits for the GPU (a host sync), so the backend keeps them few and puts each behind
``read``, named by why it is needed; docs/en/cuda.md lists them per op, and a test traces
every op on fake CUDA tensors and compares the reads it makes with that list:

  build_subm_map          1  value checks (coordinate range, batch index, duplicates)
  build_conv_map          1  value checks + number of output voxels, in one read
  transpose_map           1  map entries within [-1, num_rows), each (input row, offset) once
  pack_map                1  entries >= -1 + number of present entries, in one read
  unpack_map              1  block_starts consistent with the mask
  gather_mm, _filter      0  (a bad map entry is a device-side assertion)
  batch_norm_relu_*       0

Raising an error reads the offending row for the message (a second read, on the error path
only).
"""
import torch


def read(values: torch.Tensor, why: str) -> list:
    """``values.tolist()``: the one place device data reaches the host (``why`` names the read
    for the tests and for profiler traces)."""
    return values.tolist()
