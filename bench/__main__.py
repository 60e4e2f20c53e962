"""mx_sparse vs spconv 2.3.8 benchmark.

    python -m bench                  # full run (duration: "Run time" in docs/en/performance.md; more on a busy machine)
    python -m bench --quick          # smoke test (~3 min): 1k- and 8k-voxel SECOND + one mx_driving layer
    python -m bench --write-docs     # full run, then rewrite docs/{en,zh}/performance.md
    python -m bench --device cuda    # on a GPU: mx_sparse's CUDA backend (and spconv's CUDA build if installed)

Writes bench/results/results.json, results.md and performance.png (see --out)."""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time

import numpy as np
import torch

import mx_sparse

from . import accuracy, memory, report, spconv_nets, timing
from .workloads import WORKLOADS, describe_input, select, tiny_input

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_nets(w, libs=("mx", "spconv"), device="cpu"):
    """The workload's network in both libraries, computing the same function, on ``device``."""
    mx = w.build_mx()
    nets = {}
    if "spconv" in libs:
        sp = spconv_nets.NETS[w.net](*w.net_args)
        spconv_nets.copy_weights(mx, sp)
        nets["spconv"] = sp.to(device)
    if "mx" in libs:
        nets["mx"] = mx.to(device)
    return nets


def to_device(inp, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inp.items()}


def machine_info():
    def sh(cmd):
        try:
            return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    lscpu = dict(line.split(":", 1) for line in sh(["lscpu"]).splitlines() if ":" in line)
    commit = sh(["git", "rev-parse", "--short", "HEAD"])
    dirty = bool(sh(["git", "status", "--porcelain", "--untracked-files=no"]))
    return dict(cpu=lscpu.get("Model name", platform.processor()).strip(), logical_cpus=os.cpu_count(),
                flags_avx512=("avx512f" in lscpu.get("Flags", "")), os=platform.platform(),
                python=platform.python_version(), torch=torch.__version__, spconv=spconv_nets.VERSION,
                mx_sparse=mx_sparse.__version__, mx_sparse_commit=commit + ("+dirty" if dirty else ""),
                cpu_gemm_kernels=mx_sparse._C.cpu_gemm_kernels(),
                numpy=np.__version__, date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def cpu_snapshot():
    """(busy CPU seconds of the whole machine, CPU seconds of this process and its children,
    wall time), to tell how much other processes ran during the benchmark."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    busy = (sum(v[:8]) - v[3] - v[4]) / hz   # all but idle and iowait (guest is inside user)
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system, time.time()


def other_load(start, end):
    """Fraction of the machine's CPU time used by other processes between two snapshots."""
    busy, own, wall = (b - a for a, b in zip(start, end))
    return max(0.0, busy - own) / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_workload(w, args, vs):
    inp = w.make_input()
    res = dict(desc=w.desc, net=w.net, extra=w.extra, tags=w.tags, input=describe_input(inp))
    inp = to_device(inp, args.device)
    log(f"{w.name}: {res['input']}")
    nets = build_nets(w, libs={v.lib for v in vs}, device=args.device)
    res["accuracy"] = accuracy.check(nets, vs, inp)
    if res["accuracy"]:
        log("  max rel err vs spconv-1t: " + ", ".join(f"{k}={max(v.values()):.1e}"
                                                      for k, v in res["accuracy"].items()))
    layers = timing.conv_layers(nets["mx"], inp)
    res["layers"] = layers
    res["flops_forward"] = sum(L["flops"] for L in layers)
    res["pairs"] = sum(L["pairs"] for L in layers)
    for mode in ("forward", "train"):
        res[mode] = timing.time_networks(nets, vs, inp, mode, args.repeats, args.budget)
        log(f"  {mode}: " + ", ".join(f"{k}={v['median']*1e3:.1f}ms" for k, v in res[mode].items()))
    if "f64" in w.tags:
        res["train_f64"] = timing.time_train_float64(nets, vs, inp, args.repeats, args.budget)
        log(f"  train float64: " + ", ".join(f"{k}={v['median']*1e3:.1f}ms" for k, v in res["train_f64"].items()))
    res["maps"] = timing.time_map_building(nets, vs, inp, args.repeats, args.budget / 2)
    log(f"  maps: " + ", ".join(f"{k}={v['median']*1e3:.1f}ms" for k, v in res["maps"].items()))
    res["mm_ceiling"] = timing.mm_ceiling(layers, args.threads, device=args.device)
    if "bf16" in w.tags and not args.no_bf16:
        res["bf16"] = timing.bf16_vs_fp32(nets["mx"], inp, args.repeats, args.budget, args.threads)
        log(f"  bf16: speedup {res['bf16']['speedup']:.2f}x, max rel err {res['bf16']['max_rel_err']:.1e}")
    if not args.no_memory and torch.device(args.device).type == "cpu":
        measured = [v.name for v in vs if v.name in ("mx_sparse", "spconv-1t") or v.scatter_fix]
        for key, env in (("memory", None), ("memory_held", memory.NO_RETENTION)):
            res[key] = {name: memory.measure(w.name, name, args.threads, env=env) for name in measured}
            log(f"  {key}: " + ", ".join(f"{k}={v.get('train', {}).get('extra_mb', float('nan')):.0f}MB"
                                          for k, v in res[key].items()))
    return res


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small subset, fewer repeats (smoke test, ~3 min)")
    p.add_argument("--workloads", help="comma-separated subset of: " + ",".join(w.name for w in WORKLOADS))
    p.add_argument("--threads", type=int, default=2, help="torch threads for mx_sparse and spconv (default 2)")
    p.add_argument("--device", default="cpu",
                   help="device of the runs (default cpu); spconv runs where its installed build can (CPU wheel: cpu)")
    p.add_argument("--no-spconv", action="store_true", help="time mx_sparse alone")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds per measurement (default 5, quick 3)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds per measurement after which rounds stop (>= 3 rounds; default 60, quick 20)")
    p.add_argument("--out", default=os.path.join("bench", "results"), help="output directory")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-RSS subprocesses")
    p.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 measurement")
    p.add_argument("--write-docs", action="store_true", help="rewrite docs/en/performance.md and docs/zh/performance.md")
    p.add_argument("--report-only", action="store_true",
                   help="no measurements: rebuild the markdown/chart (and docs) from OUT/results.json")
    args = p.parse_args(argv)
    has_cuda_kernels = mx_sparse._core.op_registration.has_kernel("cuda")
    if torch.device(args.device).type == "cuda" and not (torch.cuda.is_available() and has_cuda_kernels):
        p.error(f"--device cuda: torch {torch.__version__} sees no CUDA GPU (a CUDA build of torch and a GPU are needed)")
    if args.report_only:
        with open(os.path.join(args.out, "results.json")) as f:
            results = json.load(f)
        log(f"wrote {report.write(results, args.out)}")
        if args.write_docs:
            for path in report.write_docs(results, ROOT):
                log(f"wrote {path}")
        print(report.summary(results))
        return
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.budget = args.budget or (20.0 if args.quick else 60.0)
    command = "python -m bench" + "".join(" " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))

    t_start = time.time()
    cpu_start = cpu_snapshot()
    torch.set_num_threads(args.threads)
    vs = timing.variants(args.threads, spconv=not args.no_spconv and spconv_nets.runs_on(args.device),
                         device=args.device)
    results = dict(command=command, threads=args.threads, device=str(args.device), repeats=args.repeats, budget_s=args.budget,
                   quick=args.quick, machine=machine_info(), load_before=os.getloadavg(), variants=[v.__dict__ for v in vs], workloads={})
    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "results.json")
    for w in select(args.workloads, args.quick):
        results["workloads"][w.name] = bench_workload(w, args, vs)
        with open(json_path, "w") as f:   # incremental: a crash keeps what was measured
            json.dump(results, f, indent=1)
    log("per-call overhead (SubMConv3d 4->16 on 10 voxels)")
    results["overhead"] = timing.per_call_overhead(vs, to_device(tiny_input(), args.device),
                                                   calls=50 if args.quick else 200)
    results["runtime_s"] = time.time() - t_start
    results["load_after"] = os.getloadavg()
    results["other_cpu_share"] = other_load(cpu_start, cpu_snapshot())
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    md = report.write(results, args.out)
    log(f"wrote {json_path}, {md}")
    if args.write_docs:
        for path in report.write_docs(results, ROOT):
            log(f"wrote {path}")
    print(report.summary(results))


if __name__ == "__main__":
    main()
