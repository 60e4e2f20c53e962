"""Modelled Atlas A2 time of a whole VoxelBackBone8x training step (python -m bench.ascend_cost --step).

For a generated scene (KITTI b1, nuScenes b1) the step is every layer's map build, forward, input
gradient and weight gradient, exactly the calls mx_sparse's autograd makes:

* a submanifold map per indice_key (subm1..subm4), built once and shared by the key's layers; a
  strided-conv map per downsampling layer, plus its transpose for the input gradient;
* forward gather_mm(features, W, nbr); input gradient gather_mm(grad, W^T, nbr_t) (a submanifold
  map is its own transpose with the columns reversed); weight gradient gather_mm_backprop_filter.
  The first layer's input gradient is not computed (the voxel features do not require grad).

Our kernels run in the CPU emulator (tools/ascend_emulator) with ASCEND_SIM_STATS; every launch's
counters go through the cost model of bench/ascend_cost.py. Steps between kernels that are torch ops
on the NPU (sorts, permutations, the map transpose) are modelled from the bytes they move
(TORCH_OPS, labelled assumptions). The same step is modelled for the algorithm of mx_driving's
kernels (bench/ascend_mx_driving.py). ALL FIGURES ARE MODELLED, NOT MEASURED: no kernel has run on
NPU hardware.

`--tree DIR` runs another checkout's kernels (e.g. `git archive <commit> kernels tests/ascend` of
the commit before a change) through the same workload and model, for before/after tables.
"""
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

# VoxelBackBone8x (mx_sparse/models/backbones.py): (name, kind, cin, cout, kernel, stride, padding, key)
BACKBONE = [
    ("conv_input", "subm", 4, 16, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm1"),
    ("conv1", "subm", 16, 16, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm1"),
    ("spconv2", "conv", 16, 32, (3, 3, 3), (2, 2, 2), (1, 1, 1), "spconv2"),
    ("conv2a", "subm", 32, 32, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm2"),
    ("conv2b", "subm", 32, 32, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm2"),
    ("spconv3", "conv", 32, 64, (3, 3, 3), (2, 2, 2), (1, 1, 1), "spconv3"),
    ("conv3a", "subm", 64, 64, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm3"),
    ("conv3b", "subm", 64, 64, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm3"),
    ("spconv4", "conv", 64, 64, (3, 3, 3), (2, 2, 2), (0, 1, 1), "spconv4"),
    ("conv4a", "subm", 64, 64, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm4"),
    ("conv4b", "subm", 64, 64, (3, 3, 3), (1, 1, 1), (1, 1, 1), "subm4"),
    ("conv_out", "conv", 64, 128, (3, 1, 1), (2, 1, 1), (0, 0, 0), "spconv_down2"),
]

# torch ops between our kernels, modelled by the HBM bytes they move (+ a launch overhead each).
TORCH_OPS = {
    "sort_bytes_per_key": 8 * (8 + 8),  # radix sort of int64 keys with int64 indices: 8 passes reading + writing 16 B (assumption)
    "index_bytes_per_elem": 12,         # gather/scatter of an int32 with an int64 index (assumption)
    "launch_s": 5e-6,                   # per torch op on the NPU (host launch + kernel start; assumption)
}


# Host side of a step (python -m bench.ascend_cost --step): labelled assumptions, no NPU measured.
HOST = {
    "torch_op_s": 5e-6,     # host time per torch operator issued to the NPU (the low end of TORCH_OP_RANGE)
    "host_read_s": 30e-6,   # one device->host read: stream sync + copy (assumption)
    "aclnn_call_s": 10e-6,  # aclnn two-phase call: GetWorkspaceSize + executor + launch (assumption)
}
DMA_ISSUE_RANGE = (25, 50, 100)   # cycles per DMA instruction: no published figure, so a range
# host seconds per torch operator (torch_npu dispatch + aclnn call + launch from Python): no figure
# measured on an NPU, so a range; 5 us is a lean C++ dispatch, 30 us Python-level dispatch overheads
TORCH_OP_RANGE = (5e-6, 30e-6)


def scene_layers(preset, batch_size=1):
    """Indices of every level and each layer's maps, built with the CPU backend (the emulated
    kernels are tested to produce exactly these maps)."""
    import mx_sparse.functional as F
    from mx_sparse import synthetic
    b = synthetic.make_batch(preset, batch_size)
    ind, shape = b["indices"], list(b["spatial_shape"])
    maps, layers = {}, []
    for name, kind, cin, cout, ks, st, pad, key in BACKBONE:
        if kind == "subm":
            first = key not in maps
            if first:
                maps[key] = F.build_subm_map(ind, shape, batch_size, list(ks), [1, 1, 1])
            nbr = maps[key]
            layers.append(dict(name=name, kind=kind, cin=cin, cout=cout, kernel=ks, stride=st, padding=pad, key=key,
                               builds_map=first, indices=ind, spatial_shape=list(shape), nbr=nbr, nbr_t=nbr.flip(1),
                               n_in=ind.shape[0], n_out=ind.shape[0], K=nbr.shape[1]))
        else:
            out_ind, nbr = F.build_conv_map(ind, shape, batch_size, list(ks), list(st), list(pad), [1, 1, 1])
            out_shape = [(shape[d] + 2 * pad[d] - (ks[d] - 1) - 1) // st[d] + 1 for d in range(3)]
            nbr_t = F.transpose_map(nbr, ind.shape[0])
            layers.append(dict(name=name, kind=kind, cin=cin, cout=cout, kernel=ks, stride=st, padding=pad, key=key,
                               builds_map=True, indices=ind, spatial_shape=list(shape), nbr=nbr, nbr_t=nbr_t,
                               n_in=ind.shape[0], n_out=out_ind.shape[0], K=nbr.shape[1]))
            ind, shape = out_ind, out_shape
    return layers


def torch_op_record(what, bytes_moved, ops):
    """A pseudo launch record for torch ops: HBM bytes at full bandwidth plus per-op launch time."""
    return {"kernel": what, "torch_ops": ops, "bytes": bytes_moved}


def map_torch_ops(layer):
    """Torch ops of our map builders (kernels/ascend/binding, tests/ascend/ascend_ops.py)."""
    n, m, K = layer["n_in"], layer["n_out"], layer["K"]
    sb, ib = TORCH_OPS["sort_bytes_per_key"], TORCH_OPS["index_bytes_per_elem"]
    if layer["kind"] == "subm":
        # key packing, stable sort of N keys, un-permutation nbr[perm[s]] = perm[nbrS[s]] (2 index ops over N*K)
        return torch_op_record("torch (pack, sort, un-permute)", n * 16 + n * sb + 2 * n * K * ib, 5)
    # sort of the N*J candidate keys (J slots per input: the kernel positions on the stride's lattice,
    # contract.conv_out_slot_volume), unpack of M keys, packing + sort of N input keys, perm lookup of M*K,
    # transpose_map for the input gradient (scatter of M*K entries)
    from mx_sparse._core import contract
    J = contract.conv_out_slot_volume(list(layer["kernel"]), list(layer["stride"]), [1] * len(layer["kernel"]))
    return torch_op_record("torch (sort keys, unpack, sort inputs, permute, transpose)",
                           n * J * sb + m * 40 + n * (16 + sb) + m * K * ib + m * K * ib + n * K * 4, 8)


def progress(msg):
    """One line on stderr per emulated stage: a whole step takes minutes in the emulator."""
    print(f"[ascend_step {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_ours(tree, layers, soc, dtypes, workdir):
    """Emulate every kernel of the step; returns {dtype: [(layer, phase, [records])]}."""
    sys.path.insert(0, str(Path(tree) / "tests" / "ascend"))
    try:
        ao = importlib.import_module("ascend_ops")
        importlib.reload(ao)
        binary = ao.build("ops_cli_step", ao.OPS_SOURCES)
    finally:
        sys.path.pop(0)
    g = torch.Generator().manual_seed(0)
    workdir = Path(workdir)

    def launch(fn, *args):
        stats = workdir / "stats.jsonl"
        stats.unlink(missing_ok=True)
        res = fn(binary, *args, ao.sim_env(soc=soc, stats=stats))
        recs = [json.loads(line) for line in stats.read_text().splitlines()] if stats.exists() else []
        return res, recs

    maps = []
    progress(f"{soc}: emulating the neighbor maps of {sum(bool(L['builds_map']) for L in layers)} layers")
    for i, L in enumerate(layers):
        if not L["builds_map"]:
            continue
        progress(f"{soc}: map of {L['name']} ({L['kind']}, {L['n_in']:,} voxels)")
        if L["kind"] == "subm":
            (nbr, _), recs = launch(ao.subm_map, L["indices"], L["spatial_shape"], 1, list(L["kernel"]), workdir / f"m{i}")
        else:
            (_, nbr, _), recs = launch(ao.conv_map, L["indices"], L["spatial_shape"], 1, list(L["kernel"]), list(L["stride"]),
                                       list(L["padding"]), [1, 1, 1], workdir / f"m{i}")
        assert torch.equal(nbr, L["nbr"]), f"emulated map of {L['name']} differs from the CPU map"
        maps.append((L, "map", recs, map_torch_ops(L)))
    out = {}
    for dt in dtypes:
        rows = list(maps)
        for i, L in enumerate(layers):
            progress(f"{soc} {str(dt)[6:]}: layer {i + 1}/{len(layers)} {L['name']} (forward, gradients)")
            f = torch.randn(L["n_in"], L["cin"], generator=g).to(dt)
            w = (torch.randn(L["K"], L["cin"], L["cout"], generator=g) * 0.1).to(dt)
            gr = torch.randn(L["n_out"], L["cout"], generator=g).to(dt)
            _, recs = launch(ao.gather_mm, f, w, L["nbr"], workdir / "f")
            rows.append((L, "forward", recs, None))
            if i > 0:
                _, recs = launch(ao.gather_mm_backprop_input, gr, w, L["nbr_t"], workdir / "bi")
                rows.append((L, "input grad", recs, None))
            _, recs = launch(ao.gather_mm_backprop_filter, f, gr, L["nbr"], workdir / "bw")
            rows.append((L, "weight grad", recs, None))
        out[str(dt)[6:]] = rows
    return out


def run_mx_driving(layers, soc, dtypes, aiv):
    from bench import ascend_mx_driving as mx
    out = {}
    for dt in dtypes:
        esz = torch.tensor([], dtype=dt).element_size()
        rows = []
        for L in layers:
            if L["builds_map"]:
                if L["kind"] == "subm":
                    dense = mx.dense_map_bytes(L["spatial_shape"], L["kernel"], 1)
                    rows.append((L, "map", [mx.subm_map(L, soc, aiv)],
                                 torch_op_record("torch (dense volume map: full + index_put)", dense + L["n_in"] * 16, 3)))
                else:
                    sb = TORCH_OPS["sort_bytes_per_key"]
                    rows.append((L, "map", [mx.conv_map(L, soc, aiv)],
                                 torch_op_record("torch (unique_voxel: sort + unique of N*K keys)",
                                                 L["n_in"] * L["K"] * (sb + 24), 4)))
        for L in layers:
            if L["kind"] == "subm":
                rows.append((L, "forward", [mx.subm_forward(L, soc, aiv, esz)], None))
                rows.append((L, "backward", [mx.subm_backward(L, soc, aiv, esz)], None))
            else:
                rows.append((L, "forward", [mx.conv_forward(L, soc, aiv, esz)], None))
                rows.append((L, "backward", [mx.conv_backward(L, soc, aiv, esz)], None))
        out[str(dt)[6:]] = rows
    return out


def collect(presets=("kitti", "nuscenes"), socs=("Ascend910B2", "Ascend910B4"), dtypes=(torch.float16, torch.float32),
            tree=None, with_mx=True):
    """Counters of the whole step for every (preset, soc): {"ours": ..., "mx_driving": ...} (JSON-able)."""
    from bench.ascend_cost import SOC_AIV
    tree = Path(tree or ROOT)
    result = {"tree": str(tree), "runs": []}
    for preset in presets:
        progress(f"{preset}: building the scene and its CPU reference maps")
        layers = scene_layers(preset)
        for soc in socs:
            with tempfile.TemporaryDirectory() as tmp:
                ours = run_ours(tree, layers, soc, dtypes, tmp)
            run = {"preset": preset, "soc": soc, "ours": _jsonable(ours)}
            if with_mx:
                run["mx_driving"] = _jsonable(run_mx_driving(layers, soc, dtypes, SOC_AIV[soc]))
            run["layers"] = [dict(name=L["name"], kind=L["kind"], cin=L["cin"], cout=L["cout"], n_in=L["n_in"],
                                  n_out=L["n_out"], K=L["K"], pairs=int((L["nbr"] >= 0).sum())) for L in layers]
            result["runs"].append(run)
    return result


def _jsonable(rows_by_dtype):
    return {dt: [dict(layer=L["name"], phase=phase, records=recs, torch=tor) for L, phase, recs, tor in rows]
            for dt, rows in rows_by_dtype.items()}


# ------------------------------------------------------------------------------------ tabulation
def _rec_time(rec, dtype, model):
    from bench.ascend_cost import model_launch
    r = dict(rec, _fp32=(dtype == "float32"))
    return model_launch(r, model)


def _torch_time(tor, model):
    return tor["bytes"] / model["hbm_bytes_per_s"] + tor["torch_ops"] * TORCH_OPS["launch_s"]


def phase_rows(rows, dtype, model):
    """[(layer, phase, kernel, seconds, bound, counters)] for one dtype of one run, incl. torch ops and launches."""
    out = []
    for row in rows:
        for rec in row["records"]:
            m = _rec_time(rec, dtype, model)
            out.append((row["layer"], row["phase"], rec["kernel"], m["time_s"] + model["kernel_launch_s"], m["bound_by"],
                        rec["total"], m))
        if row.get("torch"):
            out.append((row["layer"], row["phase"], "torch ops", _torch_time(row["torch"], model), "dma", None, None))
    return out


def step_time(rows, dtype, model):
    return sum(r[3] for r in phase_rows(rows, dtype, model))


def layer_times(rows, dtype, model):
    t = {}
    for r in phase_rows(rows, dtype, model):
        t[r[0]] = t.get(r[0], 0.0) + r[3]
    return t


def _kernel_label(kernel, phase):
    if kernel == "gather_mm":
        return "gather_mm (input grad)" if phase == "input grad" else "gather_mm (forward)"
    if kernel == "subm_map":
        return "lookup (subm_map kernel)"
    return kernel


def breakdown(rows, dtype, model):
    """{kernel label: {time, cube, vector, dma, scalar (time of launches bound by it), dma_calls, scalar_blocks,
    scalar_share}}."""
    agg = {}
    for layer, phase, kernel, sec, bound, tot, m in phase_rows(rows, dtype, model):
        a = agg.setdefault(_kernel_label(kernel, phase), dict(time=0.0, cube=0.0, vector=0.0, dma=0.0, scalar=0.0,
                                                             dma_calls=0, scalar_blocks=0, launches=0, pipe={}))
        a["time"] += sec
        a[bound] += sec
        if tot is not None:
            a["dma_calls"] += tot["dma_calls"]
            a["scalar_blocks"] += tot.get("scalar_blocks", 0)
            a["launches"] += 1
            for k, v in m["pipe_totals_s"].items():
                a["pipe"][k] = a["pipe"].get(k, 0.0) + v
    for a in agg.values():
        busy = sum(a["pipe"].values())
        a["scalar_share"] = a["pipe"].get("scalar", 0.0) / busy if busy else 0.0
    return agg


def _us(s):
    return f"{s * 1e6:,.0f}"


def launches(rows):
    return sum(len(r["records"]) for r in rows)


def dma_calls(rows):
    return sum(rec["total"]["dma_calls"] for r in rows for rec in r["records"])


def modelled_torch_ops(rows):
    return sum(r["torch"]["torch_ops"] for r in rows if r.get("torch"))


def host_time(ops, reads, aclnn_calls, host=None):
    h = host or HOST
    return ops * h["torch_op_s"] + reads * h["host_read_s"] + aclnn_calls * h["aclnn_call_s"]


def step_range(run, dt, host_ops, model=None, host=None):
    """[dict(dma_cycles, torch_op_s, ours_serial, ours_overlapped, mx_serial, mx_overlapped)] in seconds,
    one per (per-DMA issue cost in DMA_ISSUE_RANGE, per-operator host cost in TORCH_OP_RANGE). Serial: host
    work added to the device model (the host issues, then the device runs); overlapped: the host issues
    while the device runs (torch_npu's task queue), so max(host issue, device) plus the host reads, which
    wait for the device. Ours: the counted host operators and reads + one aclnn call per launch;
    mx_driving: its modelled torch ops + one aclnn call per launch (host reads: 0), at the same costs."""
    from bench.ascend_cost import MODEL
    out = []
    for cyc in DMA_ISSUE_RANGE:
        m = dict(model or MODEL, dma_issue_cycles=cyc)
        ours, mx = run["ours"][dt], run["mx_driving"][dt]
        dev_o, dev_m = step_time(ours, dt, m), step_time(mx, dt, m)
        for op_s in TORCH_OP_RANGE:
            h = dict(host or HOST, torch_op_s=op_s)
            issue_o = host_time(host_ops["torch_ops"], 0, launches(ours), h)
            reads_o = host_ops["host_reads"] * h["host_read_s"]
            issue_m = host_time(modelled_torch_ops(mx), 0, launches(mx), h)
            out.append(dict(dma_cycles=cyc, torch_op_s=op_s, ours_serial=dev_o + issue_o + reads_o,
                            ours_overlapped=max(dev_o, issue_o) + reads_o, mx_serial=dev_m + issue_m,
                            mx_overlapped=max(dev_m, issue_m)))
    return out


def range_summary(rng):
    """(ours fastest, ours slowest, ratio worst, ratio best) over a step_range: the ratio is mx_driving's
    step over ours, serial with serial and overlapped with overlapped; the worst end is the lowest."""
    ours = [r[k] for r in rng for k in ("ours_serial", "ours_overlapped")]
    ratios = [r["mx_" + k] / r["ours_" + k] for r in rng for k in ("serial", "overlapped")]
    return min(ours), max(ours), min(ratios), max(ratios)


def host_side_lines(result, host_ops):
    """The host side per step, the modelled step and the ours-vs-mx_driving ratio as ranges over the
    per-DMA cost and the per-operator host cost."""
    h = HOST
    lo_op, hi_op = (t * 1e6 for t in TORCH_OP_RANGE)
    lines = ["", "### Host side per step and the modelled step as a range (MODELLED)", "",
             f"Host work of one VoxelBackBone8x training step through the {host_ops.get('path', '?')} path, counted "
             f"with torch's profiler by bench/ascend_host_ops.py ({host_ops.get('voxels', '?')} voxels: the count "
             f"depends on the layers, not the voxels): **{host_ops['torch_ops']} torch operators** "
             f"(+{host_ops['view_ops']} view/metadata ops, not charged), **{host_ops['host_reads']} host reads**, "
             f"{host_ops['kernel_launches']} kernel launches. Charged at {lo_op:g}-{hi_op:g} µs per operator (a range: "
             f"no NPU measured), {h['host_read_s'] * 1e6:g} µs per host read and {h['aclnn_call_s'] * 1e6:g} µs per "
             "aclnn call (one per kernel launch, both sides) -- labelled assumptions. The per-DMA issue cost has no "
             f"published figure: {', '.join(map(str, DMA_ISSUE_RANGE))} cycles. Each combination with the host work "
             "serial to the device (added) and overlapped with it (torch_npu's task queue: the max of the two, plus the "
             "host reads). mx_driving's host side is modelled (its torch ops and one aclnn call per kernel), not counted.",
             "", "| scene | SoC | dtype | DMA-count ratio (mx_driving / ours) | host side ours (µs) "
             f"@ {lo_op:g} / {hi_op:g} µs per op | modelled step ours (ms), range | "
             "step ratio mx_driving / ours, range (worst first) |",
             "|---|---|---|---|---|---|---|"]
    grids = []
    for run in result["runs"]:
        if "mx_driving" not in run:
            continue
        for dt, rows in run["ours"].items():
            rng = step_range(run, dt, host_ops)
            fast, slow, worst, best = range_summary(rng)
            dmar = dma_calls(run["mx_driving"][dt]) / max(1, dma_calls(rows))
            hs = [host_time(host_ops["torch_ops"], host_ops["host_reads"], launches(rows), dict(h, torch_op_s=op))
                  for op in TORCH_OP_RANGE]
            lines.append(f"| {run['preset']} b1 | {run['soc']} | {dt} | {dmar:.0f}x | {_us(hs[0])} / {_us(hs[1])} | "
                         f"{fast * 1e3:.1f}-{slow * 1e3:.1f} | **{worst:.2f}-{best:.2f}x** |")
            grids.append((run, dt, rng))
    for run, dt, rng in grids[:1]:
        lines += ["", f"{run['preset']} b1, {run['soc']}, {dt}: the step ratio (mx_driving / ours) per combination, "
                  "serial / overlapped", "",
                  "| µs per torch op | " + " | ".join(f"@ {c} cycles/DMA" for c in DMA_ISSUE_RANGE) + " |",
                  "|---|" + "---|" * len(DMA_ISSUE_RANGE)]
        for op in TORCH_OP_RANGE:
            cells = [r for r in rng if r["torch_op_s"] == op]
            lines.append(f"| {op * 1e6:g} | " + " | ".join(
                f"{r['mx_serial'] / r['ours_serial']:.2f}x / {r['mx_overlapped'] / r['ours_overlapped']:.2f}x"
                for r in cells) + " |")
    return lines


def report(result, baseline=None, model=None, sens_run=("kitti", "Ascend910B2", "float16"), host_ops=None):
    from bench.ascend_cost import ASSUMED, MODEL
    model = dict(model or MODEL)
    lines = ["MODELLED Atlas A2 time of a VoxelBackBone8x training step (map builds, forward, input and weight",
             "gradients of every layer) -- a model from emulator counters and labelled constants, NOT a measurement.", ""]
    base_runs = {(r["preset"], r["soc"]): r for r in (baseline or {}).get("runs", [])}
    lines += ["| scene | SoC | dtype | ours (µs) | today's kernels (µs) | speed-up | mx_driving algorithm (µs) | ours vs mx_driving |",
              "|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        for dt, rows in run["ours"].items():
            t = step_time(rows, dt, model)
            b = base_runs.get((run["preset"], run["soc"]))
            tb = step_time(b["ours"][dt], dt, model) if b else None
            tm = step_time(run["mx_driving"][dt], dt, model) if "mx_driving" in run else None
            lines.append(f"| {run['preset']} b1 | {run['soc']} | {dt} | {_us(t)} | {_us(tb) if tb else '-'} | "
                         f"{f'{tb / t:.2f}x' if tb else '-'} | {_us(tm) if tm else '-'} | "
                         f"{f'{tm / t:.2f}x faster' if tm else '-'} |")
    for run in result["runs"]:
        for dt, rows in run["ours"].items():
            lines += ["", f"### {run['preset']} b1, {run['soc']}, {dt}: time by kernel and bound (µs; a launch's time is"
                      " counted under the pipe that bounds it)", ""]
            b = base_runs.get((run["preset"], run["soc"]))
            parts = [("ours", breakdown(rows, dt, model))]
            if b:
                parts.insert(0, ("today's kernels", breakdown(b["ours"][dt], dt, model)))
            if "mx_driving" in run:
                parts.append(("mx_driving algorithm", breakdown(run["mx_driving"][dt], dt, model)))
            lines += ["| kernels | kernel | launches | time | Cube-bound | vector-bound | DMA-bound | scalar-bound | DMAs | scalar blocks | scalar share |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]
            for label, agg in parts:
                for k, a in sorted(agg.items(), key=lambda kv: -kv[1]["time"]):
                    lines.append(f"| {label} | {k} | {a['launches']} | {_us(a['time'])} | {_us(a['cube'])} | {_us(a['vector'])} | "
                                 f"{_us(a['dma'])} | {_us(a['scalar'])} | {a['dma_calls']:,} | {a['scalar_blocks']:,} | "
                                 f"{100 * a['scalar_share']:.1f}% |")
                lines.append(f"| {label} | **total** | | **{_us(sum(a['time'] for a in agg.values()))}** | | | | | "
                             f"{sum(a['dma_calls'] for a in agg.values()):,} | {sum(a['scalar_blocks'] for a in agg.values()):,} | |")
    # per layer: ours vs mx_driving
    for run in result["runs"]:
        if "mx_driving" not in run:
            continue
        for dt, rows in run["ours"].items():
            lo, lm = layer_times(rows, dt, model), layer_times(run["mx_driving"][dt], dt, model)
            b = base_runs.get((run["preset"], run["soc"]))
            lb = layer_times(b["ours"][dt], dt, model) if b else {}
            lines += ["", f"### {run['preset']} b1, {run['soc']}, {dt}: per layer (map build charged to the layer that builds it; µs)", "",
                      "| layer | Cin->Cout | voxels in -> out | ours | today's kernels | mx_driving algorithm | ours vs mx_driving |",
                      "|---|---|---|---|---|---|---|"]
            for L in run["layers"]:
                n = L["name"]
                lines.append(f"| {n} | {L['cin']}->{L['cout']} | {L['n_in']:,} -> {L['n_out']:,} | {_us(lo[n])} | "
                             f"{_us(lb[n]) if n in lb else '-'} | {_us(lm[n])} | {lm[n] / lo[n]:.2f}x |")
    if host_ops is not None:
        lines += host_side_lines(result, host_ops)
    # sensitivity
    preset, soc, dt = sens_run
    run = next((r for r in result["runs"] if r["preset"] == preset and r["soc"] == soc), None)
    if run is not None and dt in run["ours"]:
        b = base_runs.get((preset, soc))
        lines += ["", f"### Sensitivity ({preset} b1, {soc}, {dt}): each assumed constant halved and doubled", "",
                  "| constant | value | ours (µs) | speed-up vs today's kernels | ours vs mx_driving (step) | worst layer vs mx_driving |",
                  "|---|---|---|---|---|---|"]

        def row(name, val, m):
            t = step_time(run["ours"][dt], dt, m)
            tb = step_time(b["ours"][dt], dt, m) if b else None
            tm = step_time(run["mx_driving"][dt], dt, m)
            lo, lm = layer_times(run["ours"][dt], dt, m), layer_times(run["mx_driving"][dt], dt, m)
            worst = min(lm[k] / lo[k] for k in lo)
            return (f"| {name} | {val} | {_us(t)} | {f'{tb / t:.2f}x' if tb else '-'} | {tm / t:.2f}x | {worst:.2f}x |")

        lines.append(row("(as modelled)", "-", model))
        for k in ASSUMED:
            for f in (0.5, 2.0):
                m = dict(model)
                m[k] = model[k] * f
                lines.append(row(k, f"{m[k]:g} (x{f:g})", m))
    return "\n".join(lines)
