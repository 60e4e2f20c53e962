"""Host-side work of one training step through an accelerator code path, counted on this machine
(no GPU / NPU needed): torch operators dispatched, device-kernel launches and host reads.

    MXS_CUDA_ON_CPU=1 python -m bench.host_ops [--scene kitti_b1] [--path cuda|npu]

Run with MXS_CUDA_ON_CPU=1 (the CPU ops are then the accelerator's code). The step is one
VoxelBackBone8x forward + backward (SGD-free: loss.backward()) on a generated scene, every
mx_sparse op through the dispatcher as in training. A TorchDispatchMode counts:

- torch operators: every aten operator the accelerator's Python code dispatches -- the
  orchestration (mx_sparse/_accelerator; on main, mx_sparse/_cuda), and for ``--path cuda`` the Triton
  primitives' launch code and the torch-operator primitives CUDA runs (the map primitives'
  fallbacks), which on a GPU are CUDA kernels each -- plus the aten operators of the step outside
  mx_sparse (the network's own, autograd's). Operators that launch no kernel (views, metadata,
  allocations, a ``to``/``contiguous`` that returns its input) are counted separately.
- device kernels: ``--path cuda``: Triton launches (recorded by launch.run; none is run: outputs
  are left uninitialised, which changes no count; the map primitives return their torch
  fallbacks' results, bit-equal, computed outside the counting, since the maps are built from
  them); the counted step follows one warm-up step and builds fresh maps;
  ``--path npu``: each call of one of the five primitives is one AscendC kernel launch (not traced
  inside: under MXS_CUDA_ON_CPU=1 the CUDA primitives stand in for them, under MXS_NPU_ON_CPU=1
  the emulator runs them).
- host reads: calls of the orchestration's host_sync.read plus aten._local_scalar_dense
  (.item(), bool(tensor)) anywhere in the step.

The same script runs on a checkout of main (before the single orchestration): there the CUDA
backend's Python implementations (mx_sparse._cuda.registration.IMPLEMENTATIONS) are traced the
same way. Counts, not times: on a GPU each non-view operator is at least one kernel launch.
"""
import argparse
import collections
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

VIEW_OPS = {"aten.view", "aten._unsafe_view", "aten.select", "aten.narrow", "aten.slice", "aten.unsqueeze",
            "aten.squeeze", "aten.expand", "aten.t", "aten.transpose", "aten.permute", "aten.alias",
            "aten.detach", "aten.as_strided", "aten.reshape", "aten.unbind", "aten.split", "aten.movedim",
            "aten.lift_fresh", "aten.sym_size", "aten.sym_stride", "aten.sym_numel", "aten.sym_storage_offset",
            "aten.is_same_size", "aten._reshape_alias", "aten.split_with_sizes", "aten.empty_like",
            "aten.empty", "aten.new_empty", "aten.empty_strided", "aten.new_empty_strided"}

# Operators that return their input unchanged when nothing is to be done (no kernel then).
RETURNS_SELF = {"aten.to", "aten.contiguous", "aten.type_as", "aten.resolve_conj", "aten.resolve_neg"}


def _implementations(path):
    """{op name: Python implementation} traced inside, {op name} counted as one device kernel."""
    try:                                                 # main: the CUDA backend before the orchestration
        from mx_sparse._cuda import registration as before_orchestration
        return dict(before_orchestration.IMPLEMENTATIONS), set()
    except ImportError:
        pass
    from mx_sparse._accelerator import fallback, registration
    inline = dict(registration.ORCHESTRATION)
    if path == "cuda":
        cuda_primitives = registration._cuda_primitives()
        inline.update(cuda_primitives)
        inline.update({k: v for k, v in fallback.PRIMITIVES.items() if k not in cuda_primitives})
        opaque = set()
    else:
        opaque = set(registration.PRIMITIVE_NAMES)
    return inline, opaque


class HostOpCounter(TorchDispatchMode):
    """Counts the operators a step dispatches, descending into the accelerator's Python code."""

    def __init__(self, inline, opaque):
        super().__init__()
        self.inline, self.opaque = inline, opaque
        self.ops, self.views, self.kernels = collections.Counter(), collections.Counter(), collections.Counter()
        self.scalar_reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket).replace("mx_sparse.", "")
        if func.namespace == "mx_sparse":
            if name in self.opaque:
                self.kernels[name] += 1
                return func(*args, **kwargs)
            if name in self.inline:
                with self:                      # the mode is off inside this handler: trace the Python code
                    return self.inline[name](*args, **kwargs)
            self.kernels[name] += 1             # a C++ kernel of the step (none on the accelerator path)
            return func(*args, **kwargs)
        base = str(func.overloadpacket)
        if base == "aten._local_scalar_dense":
            self.scalar_reads += 1
        out = func(*args, **kwargs)
        no_kernel = base in VIEW_OPS or (base in RETURNS_SELF and args and out is args[0])
        (self.views if no_kernel else self.ops)[base] += 1
        return out


# The Triton kernels whose outputs no count depends on: the compute kernels, and the map plans'
# (bench.cuda_work computes the schedule from the plans' torch version). The map primitives'
# kernels run (interpreted): the maps are built from their outputs.
STUBBED_KERNELS = {"gather_mm", "gather_mm_backprop_filter", "row_mask", "tile_plan", "tile_lists"}


def _stub_triton_launches(run_map_kernels=True):
    """launch.run records every launch; those of STUBBED_KERNELS stop there (outputs stay
    uninitialised), the others run -- unless ``run_map_kernels`` is False: then none runs, and
    the map primitives' results come from their torch fallbacks (``_map_results_by_fallback``)."""
    from mx_sparse._cuda import launch
    run = launch.run

    def record(kernel, name, dtype_name, tile_name, grid, tensors, *args, **constexprs):
        if run_map_kernels and name not in STUBBED_KERNELS:
            # the interpreter's own tensor copies are no device work: run outside the counting mode
            with torch.utils._python_dispatch._disable_current_modes():
                return run(kernel, name, dtype_name, tile_name, grid, tensors, *args, **constexprs)
        launch.launches[(name, dtype_name, tile_name)] += 1

    launch.run = record
    return launch.launches


def _conv_output_rows_by_operators(sorted_keys, out_shape, query_shape, stride):
    """_conv_output_rows (no fallback: an optional primitive) from the unique keys' fallback, as the
    strided builder computes it without the primitive."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    return map_primitives.output_rows_by_operators(*fallback.unique_sorted_keys(sorted_keys), out_shape, query_shape,
                                                   stride)


def _sorted_key_lookup_rows_by_operators(query_keys, sorted_keys, key_deltas, group, key_bound, order, scatter_rows,
                                         transpose_rows):
    """_sorted_key_lookup_rows (optional, no fallback) from the lookup's fallback, as the builders
    compute it without the primitive."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    found = fallback.sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound)
    return map_primitives.lookup_rows_by_operators(found, order, scatter_rows, transpose_rows)


# the optional map primitives' results computed from torch operators (they have no fallback)
_OPTIONAL_REFERENCES = {"_conv_output_rows": _conv_output_rows_by_operators,
                        "_sorted_key_lookup_rows": _sorted_key_lookup_rows_by_operators}


def _map_results_by_fallback(inline):
    """The CUDA map primitives in ``inline`` run their host code and record their launches as
    they are, and return the torch fallbacks' results (bit-equal: tests/cuda/test_maps.py),
    computed outside the counting: no map kernel is interpreted (minutes on a whole scene)."""
    from mx_sparse._accelerator import built_maps, fallback
    from mx_sparse._cuda import map_primitives
    for name, cuda_version in map_primitives.PRIMITIVES.items():
        reference = fallback.PRIMITIVES.get(name) or _OPTIONAL_REFERENCES[name]

        def primitive(*args, cuda_version=cuda_version, reference=reference):
            made = cuda_version(*args)
            with torch.utils._python_dispatch._disable_current_modes():
                result = reference(*args)
            # what the lookup's or _conv_out_keys' launch kept with its result (row keys: the
            # plans of the map, or of its transpose, then run no row_mask launch) goes with the
            # result returned instead
            # (_sorted_key_lookup_rows: the map and its transpose)
            made_map, result_map = (made[0], result[0]) if isinstance(made, tuple) else (made, result)
            key = built_maps.result_row_key(made_map) if isinstance(made_map, torch.Tensor) else None
            if key is not None:
                built_maps.keep_result_row_key(result_map, key)
            return result
        inline[name] = primitive
    return inline


def warm_up(net, x, inline, opaque):
    """One step under a throwaway counter (the map builders make their constants once per
    process), then a SparseConvTensor on a copy of the indices: the counted step builds fresh
    maps, as every training step does."""
    import mx_sparse
    with HostOpCounter(inline, opaque):
        (net(x).features.float() ** 2).mean().backward()
    net.zero_grad(set_to_none=True)
    return mx_sparse.SparseConvTensor(x.features, x.indices.clone(), x.spatial_shape, x.batch_size)


def _count_host_reads():
    try:
        from mx_sparse._cuda import host_sync            # main
    except ImportError:
        from mx_sparse._accelerator import host_sync
    reads = collections.Counter()
    read = host_sync.read

    def counted(values, why):
        reads[why] += 1
        return read(values, why)

    host_sync.read = counted
    return reads


def step(scene):
    from bench.workloads import WORKLOADS
    import mx_sparse
    work = {w.name: w for w in WORKLOADS}[f"second_{scene}"]
    net = work.build_mx().train()
    data = work.make_input()
    x = mx_sparse.SparseConvTensor(data["features"], data["indices"], data["spatial_shape"], data["batch_size"])
    return net, x


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scene", default="kitti_b1", choices=["kitti_b1", "kitti_b4", "nusc_b1"])
    parser.add_argument("--path", default="cuda", choices=["cuda", "npu"])
    args = parser.parse_args(argv)
    if os.environ.get("MXS_CUDA_ON_CPU", "0") in ("", "0") and os.environ.get("MXS_NPU_ON_CPU", "0") in ("", "0"):
        sys.exit("bench.host_ops: set MXS_CUDA_ON_CPU=1 (or MXS_NPU_ON_CPU=1): the CPU ops must be the accelerator's")
    import mx_sparse  # noqa: F401
    launches = _stub_triton_launches(run_map_kernels=False)
    reads = _count_host_reads()
    net, x = step(args.scene)
    inline, opaque = _implementations(args.path)
    if args.path == "cuda":
        _map_results_by_fallback(inline)
    x = warm_up(net, x, inline, opaque)
    reads.clear()
    before = sum(launches.values())
    counter = HostOpCounter(inline, opaque)
    with counter:
        y = net(x)
        loss = (y.features.float() ** 2).mean()
        loss.backward()
    n_voxels = x.indices.shape[0]
    print(f"scene {args.scene}: {n_voxels} voxels; path {args.path}")
    for op, n in counter.ops.most_common(None if os.environ.get("MXS_HOST_OPS_ALL") else 15):
        print(f"  {n:6d}  {op}")
    triton = sum(launches.values()) - before
    host_reads = sum(reads.values()) + counter.scalar_reads
    print("host reads:", dict(reads), f"+ {counter.scalar_reads} _local_scalar_dense")
    print("device kernels (primitives / C++):", dict(counter.kernels))
    kernels = f"triton_launches={triton}" if args.path == "cuda" else f"ascend_kernels={sum(counter.kernels.values())}"
    print(f"step: torch_ops={sum(counter.ops.values())} no_kernel_ops={sum(counter.views.values())} {kernels} "
          f"host_reads={host_reads}")


if __name__ == "__main__":
    main()
