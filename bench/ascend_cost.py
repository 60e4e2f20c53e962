"""Cost report of the mx_sparse AscendC kernels from the CPU emulator's counters.

    .venv/bin/python -m bench.ascend_cost                 # run the default cases, print the table
    .venv/bin/python -m bench.ascend_cost --soc Ascend910B4 --json out.json
    .venv/bin/python -m bench.ascend_cost --stats FILE    # only tabulate an ASCEND_SIM_STATS file

Every kernel is launched in the emulator (tools/ascend_emulator) with ASCEND_SIM_STATS; for each
launch the per-core counters (GM<->UB bytes and DMA calls, vector 256-byte repeats and
elements, Cube FLOPs, scalar GetValue/SetValue on UB and GM, basic blocks executed by the kernel's
own code) are turned into a MODELLED Atlas A2 time. THIS IS A MODEL, NOT A MEASUREMENT: no kernel
has run on NPU hardware. The constants are the public figures of
Huawei's AscendC documentation for Atlas A2 where they exist and labelled assumptions
otherwise (see MODEL below); the point of the report is the split of the work between Cube,
vector, DMA and the scalar unit, and the scalar share per kernel.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- the model (all labelled)
MODEL = {
    "clock_hz": 1.5e9,             # cube_freq=1500 MHz (910B4 INI quote, ref 1.1); used for every unit (assumption)
    "cube_flop_per_cycle_fp16": 2 * 16 ** 3,   # 16x16x16 MAC fractal per AIC per cycle (ref 1.4)
    "cube_fp32_ratio": 0.25,       # fp32 cube = 1/4 of fp16 (official, ref 1.7)
    "vector_bytes_per_cycle": 256, # one 256-byte repeat per cycle per AIV (assumption)
    "gather_bytes_per_cycle": 64,  # vector Gather: a quarter of a plain repeat's rate (assumption; no figure published)
    "hbm_bytes_per_s": 1.6e12,     # HBM bandwidth, upper public third-party figure (UNCONFIRMED, ref 1.7)
    "dma_issue_cycles": 100,       # fixed cost per DMA instruction (assumption; makes tiny per-row DMAs visible)
    "matmul_call_s": 1.0e-6,       # AIV->AIC message + Matmul pipeline fill per IterateAll (assumption)
    "scalar_ub_cycles": 10,        # one scalar GetValue/SetValue on UB incl. inserted pipe syncs (assumption)
    "scalar_gm_cycles": 200,       # one scalar GlobalTensor GetValue/SetValue (DCache miss to HBM) (assumption)
    # one basic block of the kernel's own code (loop tests, index arithmetic, branches; emulator
    # code excluded). The reference has no figure for the AI Core scalar unit. Our kernels' g++ -O1
    # blocks hold ~13 x86 instructions (static average), much of it argument set-up of emulator
    # calls that are a few register writes for an NPU instruction: assumed ~4 scalar instructions
    # per block at 1 per cycle on the in-order scalar unit (assumption; the table prints the count)
    "scalar_block_cycles": 4,
    "kernel_launch_s": 5e-6,       # host launch + core start per kernel launch (assumption; --step only)
}
# Constants that are labelled assumptions (halved / doubled in the sensitivity table of --step).
ASSUMED = ["clock_hz", "vector_bytes_per_cycle", "gather_bytes_per_cycle", "hbm_bytes_per_s", "dma_issue_cycles",
           "matmul_call_s", "scalar_ub_cycles", "scalar_gm_cycles", "scalar_block_cycles", "kernel_launch_s"]
SOC_AIV = {"Ascend910B2": 48, "Ascend910B4": 40}


def model_launch(rec, model=MODEL):
    """Modelled time of one launch record of ASCEND_SIM_STATS. Pipes of a core overlap (max);
    the two AIVs of a group share one AIC (cube time of the group = its AIVs' FLOPs or Matmul GM
    bytes, whichever is larger, plus a fixed cost per call); HBM bandwidth is shared by the active
    cores, and no launch moves its total bytes faster than the whole HBM bandwidth."""
    f = model["clock_hz"]
    fp32 = rec.get("_fp32", False)
    cube_rate = model["cube_flop_per_cycle_fp16"] * f * (model["cube_fp32_ratio"] if fp32 else 1.0)
    cores = rec["cores"]
    # .get("scalar_blocks", 0): stats files written before the emulator counted blocks lack the field
    active = [c for c in cores if c["dma_calls"] or c["vector_instr"] or c["cube_flops"] or c["scalar_ub_get"]
              or c["scalar_gm_get"] or c.get("scalar_blocks", 0)]
    n_active = max(1, len(active))
    bw_core = model["hbm_bytes_per_s"] / n_active
    mix = rec["mode"] == "MIX_AIC_1_2"
    # The AIC of a group serves both its AIVs' Matmuls: FLOPs or its own GM traffic (A/B in, C out,
    # loaded by its MTE pipes while the Cube computes) bound it, plus a fixed cost per call.
    group_flops, group_bytes, group_calls = {}, {}, {}
    for c in cores:
        g = c["core"] // 2 if mix else c["core"]
        group_flops[g] = group_flops.get(g, 0.0) + c["cube_flops"] / cube_rate
        group_bytes[g] = group_bytes.get(g, 0.0) + c.get("matmul_gm_bytes", 0) / bw_core
        group_calls[g] = group_calls.get(g, 0.0) + c["matmul_calls"] * model["matmul_call_s"]
    group_cube = {g: max(group_flops[g], group_bytes[g]) + group_calls[g] for g in group_flops}
    per_core = []
    for c in cores:
        g = c["core"] // 2 if mix else c["core"]
        gather = c.get("vector_gather_instr", 0)
        t = {
            "cube": group_cube[g] if mix else 0.0,
            "vector": ((c["vector_instr"] - gather) * 256 / model["vector_bytes_per_cycle"]
                       + gather * 256 / model["gather_bytes_per_cycle"]) / f,
            "dma": (c["gm_to_ub_bytes"] + c["ub_to_gm_bytes"]) / bw_core + c["dma_calls"] * model["dma_issue_cycles"] / f,
            "scalar": ((c["scalar_ub_get"] + c["scalar_ub_set"]) * model["scalar_ub_cycles"]
                       + (c["scalar_gm_get"] + c["scalar_gm_set"]) * model["scalar_gm_cycles"]
                       + c.get("scalar_blocks", 0) * model["scalar_block_cycles"]) / f,
        }
        t["core"] = max(t["cube"], t["vector"], t["dma"], t["scalar"])
        per_core.append(t)
    total = {k: sum(t[k] for t in per_core) for k in ("cube", "vector", "dma", "scalar")}
    busy = sum(total.values()) or 1.0
    crit = max(per_core, key=lambda t: t["core"]) if per_core else {"core": 0.0}
    # all cores share one HBM: the launch moves its total bytes (AIV DMAs and the AIC's Matmul operands)
    # no faster than the full bandwidth, however they are spread over the cores
    hbm_s = sum(c["gm_to_ub_bytes"] + c["ub_to_gm_bytes"] + c.get("matmul_gm_bytes", 0) for c in cores) / model["hbm_bytes_per_s"]
    if hbm_s > crit["core"]:
        crit = dict(crit, core=hbm_s, dma=hbm_s)
    return {"time_s": crit["core"], "bound_by": max(("cube", "vector", "dma", "scalar"), key=lambda k: crit.get(k, 0)),
            "scalar_share": total["scalar"] / busy, "pipe_totals_s": total,
            "critical_s": {k: crit.get(k, 0.0) for k in ("cube", "vector", "dma", "scalar")}}


def format_row(name, shape, rec, m):
    t = rec["total"]
    launch = f"{rec['block_dim']}x(1 AIC+2 AIV)" if rec["mode"] == "MIX_AIC_1_2" else f"{rec['block_dim']} AIV"
    return (f"| {name} | {shape} | {rec['soc']} {launch} | {t['gm_to_ub_bytes'] / 1e6:.2f} / "
            f"{t['ub_to_gm_bytes'] / 1e6:.2f} | {t['dma_calls']} | {t['vector_instr']} / {t['vector_elems']} | "
            f"{t['cube_flops'] / 1e9:.3f} | {t['scalar_ub_get'] + t['scalar_ub_set']} / "
            f"{t['scalar_gm_get'] + t['scalar_gm_set']} | {t.get('scalar_blocks', 0)} | "
            f"{m['time_s'] * 1e6:.1f} ({m['bound_by']}) | "
            f"{100 * m['scalar_share']:.1f}% |")


HEADER = ("| kernel | shape | launch | GM->UB / UB->GM MB | DMAs | vec repeats / elems | Cube GFLOP | "
          "scalar UB / GM ops | scalar blocks | MODELLED A2 time us (bound) | scalar share | UB peak B |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def default_cases():
    import torch

    import mx_sparse.functional as F
    from mx_sparse import synthetic
    b = synthetic.make_batch("kitti")
    ind, shape = b["indices"], b["spatial_shape"]
    nbr = F.build_subm_map(ind, shape, 1, [3, 3, 3], [1, 1, 1])
    n = ind.shape[0]
    g = torch.Generator().manual_seed(0)
    cases = []
    for cin, cout, dt in [(4, 16, torch.float16), (16, 16, torch.float16), (16, 16, torch.float32)]:
        f = torch.randn(n, cin, generator=g).to(dt)
        w = torch.randn(27, cin, cout, generator=g).to(dt)
        cases.append(("gather_mm", f"kitti N={n} K=27 {cin}->{cout} {str(dt)[6:]}", dict(features=f, weight=w, nbr=nbr)))
    for cin, cout, dt in [(16, 16, torch.float16), (16, 16, torch.float32)]:
        f = torch.randn(n, cin, generator=g).to(dt)
        gr = torch.randn(n, cout, generator=g).to(dt)
        cases.append(("gather_mm_backprop_filter", f"kitti N={n} K=27 {cin}->{cout} {str(dt)[6:]}",
                      dict(features=f, grad=gr, nbr=nbr)))
    return cases + mx_driving_cases(g), (ind, shape)


def mx_driving_cases(g):
    """mx_driving's test layers (61 557 voxels in [1440, 1440, 41] 16->32, 38 153 in [1180, 180, 5]
    128->256, SubMConv3d k3) with the voxel count scaled down: the LiDAR voxels nearest the sensor
    (the bench's subm_61557 / subm_38153 generator), fp16."""
    import torch

    import mx_sparse.functional as F
    from bench.workloads import NUSC_075, STRIP, lidar_xyz_grid
    cases = []
    for make, n, cin, cout in [(lambda n: lidar_xyz_grid(n, **NUSC_075), 10000, 16, 32),
                               (lambda n: lidar_xyz_grid(n, **STRIP, num_sweeps=20), 2000, 128, 256)]:
        d = make(n)()
        nbr = F.build_subm_map(d["indices"], d["spatial_shape"], 1, [3, 3, 3], [1, 1, 1])
        shape = f"mx_driving {list(d['spatial_shape'])} N={n} K=27 {cin}->{cout} float16"
        f = torch.randn(n, cin, generator=g).half()
        w = torch.randn(27, cin, cout, generator=g).half()
        cases.append(("gather_mm", shape, dict(features=f, weight=w, nbr=nbr)))
        cases.append(("gather_mm_backprop_filter", shape,
                      dict(features=f, grad=torch.randn(n, cout, generator=g).half(), nbr=nbr)))
    return cases


def run_cases(soc, aic=None, tree=None):
    import importlib

    import torch
    sys.path.insert(0, str(Path(tree or ROOT) / "tests" / "ascend"))
    try:
        ao = importlib.reload(importlib.import_module("ascend_ops"))
    finally:
        sys.path.pop(0)
    binary = ao.build("ops_cli", ao.OPS_SOURCES)
    cases, scene = default_cases()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (kernel, shape, a) in enumerate(cases):
            stats = Path(tmp) / f"s{i}.jsonl"
            env = ao.sim_env(soc=soc, aic=aic, stats=stats)
            if kernel == "gather_mm":
                _, info = ao.gather_mm(binary, a["features"], a["weight"], a["nbr"], Path(tmp) / f"c{i}", env)
            else:
                _, info = ao.gather_mm_backprop_filter(binary, a["features"], a["grad"], a["nbr"], Path(tmp) / f"c{i}", env)
            rec = json.loads(stats.read_text().splitlines()[-1])
            rec["_fp32"] = a["features"].dtype == torch.float32
            rows.append((kernel, shape, rec, info))
        if hasattr(ao, "subm_map"):
            ind, shape = scene
            stats = Path(tmp) / "subm.jsonl"
            _, info = ao.subm_map(binary, ind, shape, 1, [3, 3, 3], Path(tmp) / "subm", ao.sim_env(soc=soc, aic=aic, stats=stats))
            for line in stats.read_text().splitlines():
                rec = json.loads(line)
                rows.append(("subm_map (lookup)", f"kitti N={ind.shape[0]} K=27", rec, info))
            stats = Path(tmp) / "conv.jsonl"
            oc, _, info = ao.conv_map(binary, ind, shape, 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], Path(tmp) / "conv",
                                      ao.sim_env(soc=soc, aic=aic, stats=stats))
            # three launches: candidate keys, unique of the (torch-)sorted keys, lookup
            tilings = {"conv_out_keys": ("conv_out_keys", info["cand"]),
                       "unique_sorted_keys": ("unique_sorted_keys", info["unique"]), "subm_map": ("conv_map (lookup)", info)}
            for line in stats.read_text().splitlines():
                rec = json.loads(line)
                name, tiling = tilings[rec["kernel"]]
                tiling = {k: v for k, v in tiling.items() if k not in ("keys", "cand", "unique")}
                rows.append((name, f"kitti N={ind.shape[0]}->M={oc.shape[0]} K=27 s=2", rec, tiling))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.ascend_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soc", default="Ascend910B2", help="the Atlas A2 chip modelled: Ascend910B2 (default) or Ascend910B4")
    ap.add_argument("--aic", type=int, default=None, help="override the AIC count (AIV = 2x)")
    ap.add_argument("--stats", help="tabulate an existing ASCEND_SIM_STATS file instead of running cases")
    ap.add_argument("--json", help="also write the rows (counters + model) to this file")
    ap.add_argument("--step", action="store_true",
                    help="model a whole VoxelBackBone8x training step (KITTI and nuScenes b1, fp16/fp32, 910B2/910B4) "
                         "and the same step for mx_driving's algorithm; see bench/ascend_step.py")
    ap.add_argument("--step-json", help="--step: write the step's counters to this file (or, with --tabulate, read them)")
    ap.add_argument("--baseline", help="--step: counters of the step with other kernels (a --step-json file) for before/after")
    ap.add_argument("--tree", help="run the kernels of this checkout instead (e.g. an older commit's kernels/ascend + tests/ascend)")
    ap.add_argument("--tabulate", action="store_true", help="--step: only tabulate --step-json (no emulator runs)")
    ap.add_argument("--quick", action="store_true", help="--step: KITTI fp16 on 910B2 only")
    ap.add_argument("--host-ops-json", help="--step: host-side counts of a step (bench/ascend_host_ops.py --json); "
                                            "default: count them now, in a subprocess (a minute or two)")
    ap.add_argument("--host-path", default="npu-on-cpu",
                    help="--step: the path whose host side is counted (bench/ascend_host_ops.py PATHS); default: the "
                         "NPU path itself (MXS_NPU_ON_CPU=1, the AscendC kernels in the emulator)")
    ap.add_argument("--host-voxels", type=int, default=600,
                    help="--step: voxels of the scene the host side is counted on (the count depends on the layers)")
    args = ap.parse_args(argv)
    if args.step:
        from bench import ascend_step
        import torch
        if args.tabulate:
            result = json.loads(Path(args.step_json).read_text())
        else:
            kw = dict(presets=("kitti",), socs=("Ascend910B2",), dtypes=(torch.float16,)) if args.quick else {}
            result = ascend_step.collect(tree=args.tree, **kw)
            if args.step_json:
                Path(args.step_json).write_text(json.dumps(result))
        baseline = json.loads(Path(args.baseline).read_text()) if args.baseline else None
        from bench import ascend_host_ops
        if args.host_ops_json:
            host_ops = json.loads(Path(args.host_ops_json).read_text())
        else:
            ascend_step.progress(f"counting the host-side operators of one step ({args.host_path}, in a subprocess)")
            host_ops = ascend_host_ops.count_path(args.host_path, args.host_voxels)
        print(ascend_step.report(result, baseline, host_ops=host_ops))
        print()
        print("Model constants: " + ", ".join(f"{k}={v:g}" for k, v in MODEL.items()) + "; torch ops: "
              + ", ".join(f"{k}={v:g}" for k, v in ascend_step.TORCH_OPS.items()) + "; host side: "
              + ", ".join(f"{k}={v:g}" for k, v in ascend_step.HOST.items()) + "; torch_op_s range: "
              + "-".join(f"{v * 1e6:g}" for v in ascend_step.TORCH_OP_RANGE) + " us")
        return
    if args.stats:
        rows = [(json.loads(l)["kernel"], "-", json.loads(l), {}) for l in Path(args.stats).read_text().splitlines() if l]
    else:
        rows = run_cases(args.soc, args.aic, args.tree)
    print("MODELLED Atlas A2 cost from emulator counters -- a model, not a measurement; "
          "AscendC kernels have not run on NPU hardware.")
    print("Model constants: " + ", ".join(f"{k}={v:g}" for k, v in MODEL.items()))
    print(HEADER)
    out = []
    for kernel, shape, rec, info in rows:
        m = model_launch(rec)
        print(format_row(kernel, shape, rec, m) + (f" {info['ub_bytes']} |" if info.get("ub_bytes") else " - |"))
        out.append({"kernel": kernel, "shape": shape, "counters": rec["total"], "model": m, "tiling": info,
                    "soc": rec["soc"], "block_dim": rec["block_dim"]})
    if args.json:
        Path(args.json).write_text(json.dumps({"model": MODEL, "rows": out}, indent=1))


if __name__ == "__main__":
    main()
