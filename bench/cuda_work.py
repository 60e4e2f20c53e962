"""The work of one training step through the CUDA code path, counted on this machine (no GPU).

    python -m bench.cuda_work [--scene kitti_b1|kitti_b4|nusc_b1]

One VoxelBackBone8x forward + backward (loss.backward()) on a generated scene, every mx_sparse op
through the dispatcher as in training (MXS_CUDA_ON_CPU=1 is set here: the CPU ops are then the
CUDA backend's code). Per layer and for the step:

- useful MACs: present map entries x Cin x Cout for the forward, the input gradient and the
  weight gradient (the work a dense GEMM over exactly the present pairs does);
- issued MACs: the multiply-adds of the Triton kernels' tl.dot steps for the real maps and the
  real tile choice, computed from the kernels' schedule (mx_sparse._cuda.schedule) -- the
  interpreter would take hours on whole scenes; the schedule's count equals the kernels' own
  executed-step counter on small layers (tests/cuda/test_interpreted_kernels.py);
- torch kernels, Triton launches, host reads: counted by bench.host_ops' TorchDispatchMode on
  the real step (after one warm-up step: the map builders' constants are made once per process;
  the counted step builds fresh maps), with each Triton launch replaced by a counting stand-in
  that leaves the launch's outputs as allocated (uninitialised: the counts do not depend on
  them). The map primitives run their host code and launches as they are and return their torch
  fallbacks' results (bit-equal, tests/cuda/test_maps.py: no kernel is interpreted, the run takes
  seconds); the issued MACs are computed afterwards from plans built by
  map_plan.reference_build, the torch version the plan kernels are tested against.

The maps are the ones the CUDA path builds (mx_sparse/_accelerator, bit-equal to the CPU backend's,
tests/cuda/test_maps.py). The last line is
``step: useful_gmac=<x> issued_gmac=<y> ratio=<y/x> torch_kernels=<n> triton_launches=<n> host_reads=<n>``.
"""
import argparse
import collections
import os
import sys

# Before torch: torch imports triton, and triton reads TRITON_INTERPRET when imported (set later,
# the kernels' nested @triton.jit helpers fail under the interpreter). MXS_CUDA_ON_CPU=1 needs it.
os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from bench import host_ops  # noqa: E402

GATHER, FILTER = "_gather_mm_one_group", "_gather_mm_backprop_filter_one_group"
# the input gradient's gather on the layer's own weight [K, Cin, Cout], read transposed
TRANSPOSED = "_gather_mm_transposed"


class Calls:
    """The gather primitives' calls of the step, attributed to layers: a forward call to the
    layer whose forward runs, a backward call to the latest layer (backward runs in reverse)
    with the same map geometry that has not had that kind of call yet."""

    def __init__(self):
        self.layer = None
        self.forward = []           # (layer, nbr, input rows, cin, cout, dtype)
        self.backward = []          # (kind, nbr, input rows, cin, cout, dtype)

    def wrap(self, name, fn):
        def recorded(*args):
            a, b, nbr = args[:3]       # (a filter call may add the activation's scale and shift)
            cin = a.shape[1]
            cout = b.shape[2] if name == GATHER else b.shape[1]     # (the filter's grad; the layer's Cin)
            record = (nbr, a.shape[0], cin, cout, a.dtype)
            if self.layer is not None and name == GATHER:
                self.forward.append((self.layer,) + record)
            else:
                self.backward.append(("dW" if name == FILTER else "dX",) + record)
            return fn(*args)
        return recorded

    def hook(self, net):
        import mx_sparse
        for name, mod in net.named_modules():
            if isinstance(mod, mx_sparse.nn.conv.SparseConvolution):
                mod.register_forward_pre_hook(lambda m, inp, n=name: setattr(self, "layer", n))
                mod.register_forward_hook(lambda m, inp, out: setattr(self, "layer", None))


def _dtype_name(dtype):
    from mx_sparse._cuda import launch
    return launch.operand_type(dtype)


def per_layer(calls):
    """{layer: {"fwd"|"dX"|"dW": (useful, issued)}} in forward order."""
    from mx_sparse._cuda import schedule
    table = collections.OrderedDict()
    geometry = {}
    for layer, nbr, rows, cin, cout, dtype in calls.forward:
        present = int((nbr >= 0).sum())
        issued = schedule.gather_issued_macs(nbr, rows, cin, cout, _dtype_name(dtype))
        table[layer] = {"fwd": (present * cin * cout, issued)}
        geometry[layer] = (nbr.shape[1], cin, cout, present)
    done = {"dX": set(), "dW": set()}
    for kind, nbr, rows, cin, cout, dtype in calls.backward:
        present = int((nbr >= 0).sum())
        want = (nbr.shape[1], cout, cin, present) if kind == "dX" else (nbr.shape[1], cin, cout, present)
        layer = next(n for n in reversed(list(geometry)) if geometry[n] == want and n not in done[kind])
        done[kind].add(layer)
        fn = schedule.gather_issued_macs if kind == "dX" else schedule.filter_issued_macs
        table[layer][kind] = (present * cin * cout, fn(nbr, rows, cin, cout, _dtype_name(dtype)))
    return table


def run(scene):
    import mx_sparse  # noqa: F401
    launches = host_ops._stub_triton_launches(run_map_kernels=False)
    reads = host_ops._count_host_reads()
    net, x = host_ops.step(scene)
    inline, opaque = host_ops._implementations("cuda")
    host_ops._map_results_by_fallback(inline)
    x = host_ops.warm_up(net, x, inline, opaque)
    reads.clear()
    calls = Calls()
    calls.hook(net)
    for name in (GATHER, FILTER, TRANSPOSED):
        inline[name] = calls.wrap(name, inline[name])
    before = sum(launches.values())
    counter = host_ops.HostOpCounter(inline, opaque)
    with counter:
        y = net(x)
        loss = (y.features.float() ** 2).mean()
        loss.backward()
    counts = {"torch_kernels": sum(counter.ops.values()), "triton_launches": sum(launches.values()) - before,
              "host_reads": sum(reads.values()) + counter.scalar_reads, "voxels": x.indices.shape[0]}
    # the plans the step made came from stubbed launches: the schedule takes the torch reference's
    from mx_sparse._cuda import map_plan
    map_plan._cache.clear()
    map_plan._build = map_plan.reference_build
    return per_layer(calls), counts


def _g(macs):
    return macs / 1e9


def report(scene, table, counts):
    lines = [f"scene {scene}: {counts['voxels']} voxels; VoxelBackBone8x forward + backward through the CUDA path "
             f"(Triton launches replaced by a counting stand-in; issued MACs from the kernels' schedule)",
             "| layer | fwd useful / issued GMAC | dX useful / issued | dW useful / issued | layer ratio |",
             "| --- | --- | --- | --- | --- |"]
    useful = issued = 0
    for layer, kinds in table.items():
        cells = []
        for kind in ("fwd", "dX", "dW"):
            if kind in kinds:
                u, i = kinds[kind]
                cells.append(f"{_g(u):.3f} / {_g(i):.3f} ({i / max(u, 1):.2f})")
            else:
                cells.append("-")
        lu, li = sum(u for u, _ in kinds.values()), sum(i for _, i in kinds.values())
        useful, issued = useful + lu, issued + li
        lines.append(f"| {layer} | {' | '.join(cells)} | {li / max(lu, 1):.2f} |")
    lines.append(f"step: useful_gmac={_g(useful):.3f} issued_gmac={_g(issued):.3f} ratio={issued / max(useful, 1):.2f} "
                 f"torch_kernels={counts['torch_kernels']} triton_launches={counts['triton_launches']} "
                 f"host_reads={counts['host_reads']}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scene", default="kitti_b1", choices=["kitti_b1", "kitti_b4", "nusc_b1"])
    args = parser.parse_args(argv)
    # the CPU ops must be the CUDA backend's: set before mx_sparse (and triton) are imported
    os.environ.setdefault("MXS_CUDA_ON_CPU", "1")
    if os.environ.get("MXS_CUDA_ON_CPU") != "1":
        sys.exit("bench.cuda_work: MXS_CUDA_ON_CPU must be 1 (the CPU ops must be the CUDA backend's)")
    table, counts = run(args.scene)
    print(report(args.scene, table, counts))


if __name__ == "__main__":
    main()
