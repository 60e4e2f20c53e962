"""The accelerator orchestration's only reads of device values by the host.

A read waits for the device (a host sync), so the orchestration keeps them few and puts each
behind ``read``, named by why it is needed; docs/en/cuda.md lists them per op, and a test traces
every op on fake CUDA tensors and compares the reads it makes with that list:

  build_subm_map          1  value checks (coordinate range, batch index, duplicates); 0 on indices
                             a builder checked or emitted (built_maps.py): its size is known (N x K)
  build_conv_map          1  number of output voxels (the count of _unique_sorted_keys: it sizes
                             the outputs), with the value checks of unchecked indices, in one read
  build_conv_transpose_map 1 the same, for the transposed conv's map
  build_conv_map_at       1  value checks of indices and out_indices, in one read
  transpose_map           1  map entries within [-1, num_rows), each (input row, offset) once;
                             0 for a map a builder made (valid by construction, built_maps.py)
  pack_map                1  entries >= -1 + number of present entries (the size of values), in one
                             read; a training step calls it only where maps are held packed
                             (not on CUDA: registration.PACKS_MAPS)
  unpack_map              1  block_starts consistent with the mask (the same)
  gather_mm, _filter      0  (CUDA: a bad map entry is a device-side assertion)
  batch_norm_relu_*       0
  the five primitives     0  (fallbacks and CUDA kernels; the count of _unique_sorted_keys
                             stays on the device until build_conv_map's read)

A KITTI b1 training step on CUDA reads 5 times: the first submanifold map's value checks (the
user's indices) and the 4 strided maps' output counts.

Raising an error reads the offending row for the message (a second read, on the error path
only; build_subm_map first reads the rows' flags, its value checks being a summary). The same
reads happen on every accelerator (CUDA, NPU): the code is the same.
"""
import torch


def read(values: torch.Tensor, why: str) -> list:
    """``values.tolist()``: the one place device data reaches the host (``why`` names the read
    for the tests and for profiler traces)."""
    return values.tolist()
