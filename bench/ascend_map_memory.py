"""Do neighbor maps need to be held packed on the NPU? The bytes of the maps a training step holds,
next to the step's peak, with and without packing.

    python -m bench.ascend_map_memory [--workloads second_kitti_b1 second_kitti_b4] [--json out.json]

For each workload (VoxelBackBone8x on bench/workloads.py's KITTI-like scenes) and each choice
(``packed``: maps no layer is using are held packed, mx_sparse/nn/packed_map.py; ``dense``: every map
stays dense), one fresh process runs a warm-up training step, then one more: the peak resident
memory during the step over the resident memory before it, measured as bench/memory.py does
(glibc's mmap threshold fixed at 64 KiB and mx_sparse's CPU pool keeping nothing, so that every
large tensor is returned at its free and the peak is what the step holds at once). The maps (and transposes) the step built are summed from its ``indice_dict``:
``int32 [M, K]`` dense, and the three tensors of ``pack_map`` packed.

The step runs on the C++ CPU backend, one thread. The NPU path builds the same maps bit for
bit and holds the same features, gradients and saved tensors (tests/accelerator); its temporaries
differ. The NPU path itself in the emulator takes minutes per KITTI step on this machine, which is
why the CPU backend stands in for it here. Bytes are what the step allocates, the same on any
device; how they compare with a device's memory is printed beside them (HBM of an Atlas A2 card:
32 or 64 GB).
"""
import argparse
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.memory import NO_RETENTION

ROOT = Path(__file__).resolve().parent.parent
CHOICES = ("packed", "dense")
NPU_HBM_GB = (32, 64)   # Atlas 800T A2 cards: 910B4 32 GB, 910B1-3 64 GB HBM (public spec sheets)


def _map_bytes(indice_dict) -> dict:
    """Dense and packed bytes of every map (and transpose) in a step's map cache."""
    from mx_sparse.nn.packed_map import PackedMap
    dense = packed = count = 0
    for data in indice_dict.values():
        held = [data._nbr] + ([data._nbr_t] if data._nbr_t is not None else [])
        for h in held:
            nbr = h.dense()
            pk = PackedMap.of(nbr) if nbr.numel() else None
            dense += nbr.numel() * nbr.element_size()
            packed += sum(t.numel() * t.element_size() for t in (pk.mask, pk.values, pk.block_starts)) if pk else 0
            count += 1
    return {"maps": count, "map_bytes_dense": dense, "map_bytes_packed": packed}


def measure_here(workload: str, choice: str) -> dict:
    """One warm-up step, then the measured one (see the module docstring)."""
    import torch

    import mx_sparse
    from mx_sparse.nn import packed_map
    from bench.memory import _reset_hwm, _status_kb, _trim_heap
    from bench.workloads import BY_NAME
    if choice == "dense":
        packed_map._has_packing_kernels = lambda device_type: False   # every map stays dense
    torch.set_num_threads(1)
    w = BY_NAME[workload]
    inp, net = w.make_input(), w.build_mx()
    last = {}

    def step():
        x = mx_sparse.SparseConvTensor(inp["features"], inp["indices"], inp["spatial_shape"], inp["batch_size"])
        out = net(x)
        out = out[-1] if isinstance(out, (list, tuple)) else out
        out.features.sum().backward()
        last["indice_dict"] = out.indice_dict
        net.zero_grad(set_to_none=True)

    step()
    last.clear()
    gc.collect()
    _trim_heap()
    if not _reset_hwm():
        raise RuntimeError("cannot reset the resident-memory high-water mark (/proc/self/clear_refs)")
    base = _status_kb("VmRSS")
    step()
    res = {"workload": workload, "choice": choice, "voxels": int(inp["indices"].shape[0]),
           "step_peak_bytes": (_status_kb("VmHWM") - base) * 1024}
    res.update(_map_bytes(last["indice_dict"]))
    return res


def measure(workload: str, choice: str, timeout: float = 1200) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench import ascend_map_memory as m; "
            f"print('MXS-MAP-MEMORY ' + json.dumps(m.measure_here({workload!r}, {choice!r})))")
    env = {**os.environ, **NO_RETENTION}
    for switch in ("MXS_NPU_ON_CPU", "MXS_CUDA_ON_CPU"):
        env.pop(switch, None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)
    for line in r.stdout.splitlines():
        if line.startswith("MXS-MAP-MEMORY "):
            return json.loads(line[len("MXS-MAP-MEMORY "):])
    raise RuntimeError(f"measuring {workload} ({choice}) failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def _mb(b):
    return f"{b / 2**20:,.1f}"


def report(rows) -> str:
    by = {(r["workload"], r["choice"]): r for r in rows}
    lines = ["| workload | voxels | maps | maps dense MiB | maps packed MiB | step peak, dense maps MiB | "
             "step peak, packed maps MiB | packing saves | peak vs 32 GB HBM |",
             "|---|---|---|---|---|---|---|---|---|"]
    for w in dict.fromkeys(r["workload"] for r in rows):
        d, p = by.get((w, "dense")), by.get((w, "packed"))
        if not (d and p):
            continue
        saved = d["step_peak_bytes"] - p["step_peak_bytes"]
        lines.append(f"| {w} | {d['voxels']:,} | {d['maps']} | {_mb(d['map_bytes_dense'])} | {_mb(d['map_bytes_packed'])} | "
                     f"{_mb(d['step_peak_bytes'])} | {_mb(p['step_peak_bytes'])} | {_mb(saved)} MiB "
                     f"({100 * saved / max(1, d['step_peak_bytes']):.0f}% of the peak) | "
                     f"{100 * d['step_peak_bytes'] / (NPU_HBM_GB[0] * 1e9):.2f}% |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.ascend_map_memory", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", nargs="+", default=["second_kitti_b1", "second_kitti_b4"])
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = [measure(w, c) for w in a.workloads for c in CHOICES]
    print("Bytes a VoxelBackBone8x training step holds (C++ CPU backend, one thread, peak resident memory "
          "over the step's start as bench/memory.py measures it; the NPU path builds the same maps and holds the "
          "same tensors):")
    print(report(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
