"""The GPU benchmark of mx_sparse: one VoxelBackBone8x training step measured every way that
tells where its time goes, beside spconv and spconv-Triton.

    python -m bench.gpu_profile --out DIR [options]       # needs a CUDA GPU; exits 2 without one
    python -m bench.gpu_profile --list-parts               # what would run, in order

Each part runs in its own subprocess with a hard timeout (bench/part_runner.py) and appends one
JSON line per result, as it is measured, to DIR/results.jsonl (its output in DIR/<part>.log):

  env                 versions (torch, CUDA, triton, spconv, cumm), GPU name, SMs, clocks
                      (nvidia-smi), the precision switches and the environment variables;
  step-<mode>         mx_sparse's step for each mode (fp32-ieee, fp32-tf32, amp-fp16, amp-bf16,
                      fp32-torchbn: fp32 with torch's BatchNorm1d+ReLU instead of the fused one),
                      with fresh maps (a new input tensor a step) and with cached maps (one input
                      whose maps the layers built at the first step): first-step seconds, then
                      median wall, host-until-return and GPU-event milliseconds;
  kernels             torch.profiler of one fp32-ieee step: kernels by name (count, total µs,
                      category GEMM / BatchNorm / maps+sort / copies / other), GPU busy vs wall,
                      device-to-host copies and synchronisations;
  gemm                every GEMM launch of one fp32 step (forward, dX, dW per layer) replayed
                      alone: µs and useful / issued TFLOP/s, IEEE and TF32;
  graph               the cached-maps fp32-ieee step captured in a CUDA graph and replayed
                      (replay ~ GPU time; eager - replay ~ host time), or why capture failed;
  spconv-<mode>       the same step with spconv 2.x (SPCONV_ALLOW_TF32=1 for fp32-tf32; under
                      autocast spconv casts to fp16);
  clocks              nvidia-smi's clocks and throttle reasons again, after the load;
  spconv-triton-<mode> the same with spconv-Triton, every triton autotuner pinned to its first
                      configuration (otherwise hundreds of variants compile), last.

The total can be capped (--budget): a part gets at most what is left. Exit status: 0 when
every part ended ok, 1 otherwise (the results file says which and why), 2 without a GPU.
``pytest -m cuda`` is a separate command; tools/gpu_check.sh runs both in one session.
"""
import argparse
import os
import sys

from bench import part_runner

MODES = ("fp32-ieee", "fp32-tf32", "amp-fp16", "amp-bf16", "fp32-torchbn")
SCENES = ("kitti_b1", "kitti_b4", "nusc_b1")
# spconv keeps its own BatchNorm (torch's): its fp32-torchbn would repeat fp32-ieee
SPCONV_MODES = ("fp32-ieee", "fp32-tf32", "amp-fp16", "amp-bf16")
SPCONV_TRITON_MODES = ("fp32-ieee", "amp-fp16")
PARTS = ("env", "step", "kernels", "gemm", "graph", "spconv", "clocks", "spconv-triton")
NO_GPU = 2
# Every part runs the compiled kernels: Triton's interpreter and the CPU emulations off, whatever
# the calling shell (or a test harness) had set.
COMPILED = {"TRITON_INTERPRET": "0", "MXS_CUDA_ON_CPU": "0", "MXS_NPU_ON_CPU": "0"}


def _modes(text, allowed, what):
    modes = [m for m in text.split(",") if m]
    bad = [m for m in modes if m not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"{what}: unknown mode {bad[0]!r}; expected some of {', '.join(allowed)}")
    return modes


def _positive(text):
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def parser():
    p = argparse.ArgumentParser(prog="python -m bench.gpu_profile", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--out", default="gpu_profile", help="folder of results.jsonl and the parts' logs "
                                                        "(default ./gpu_profile)")
    p.add_argument("--scene", default="kitti_b1", choices=SCENES, help="the generated scene (default kitti_b1)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per measurement (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first, the first one timed apart (default 3)")
    p.add_argument("--modes", default=",".join(MODES), type=lambda t: _modes(t, MODES, "--modes"),
                   help=f"mx_sparse's modes, comma-separated (default all: {','.join(MODES)})")
    p.add_argument("--spconv-modes", default=",".join(SPCONV_MODES),
                   type=lambda t: _modes(t, SPCONV_MODES, "--spconv-modes"), help="spconv's modes")
    p.add_argument("--spconv-triton-modes", default=",".join(SPCONV_TRITON_MODES),
                   type=lambda t: _modes(t, SPCONV_MODES, "--spconv-triton-modes"), help="spconv-Triton's modes")
    p.add_argument("--parts", default=",".join(PARTS), type=lambda t: _modes(t, PARTS, "--parts"),
                   help=f"which parts run (default all, in this order: {','.join(PARTS)})")
    p.add_argument("--part-timeout", type=_positive, default=120.0, help="seconds per mx_sparse part (default 120)")
    p.add_argument("--spconv-timeout", type=_positive, default=90.0, help="seconds per spconv part (default 90)")
    p.add_argument("--spconv-triton-timeout", type=_positive, default=180.0,
                   help="seconds per spconv-Triton part (default 180)")
    p.add_argument("--budget", type=_positive, default=None, help="seconds for all parts together (default none)")
    p.add_argument("--spconv-triton-module", default="spconv_triton.pytorch",
                   help="import name of spconv-Triton's spconv.pytorch equivalent (default spconv_triton.pytorch)")
    p.add_argument("--list-parts", action="store_true", help="print the parts that would run, and stop")
    p.add_argument("--run-part", help=argparse.SUPPRESS)     # inside a part's subprocess
    p.add_argument("--mode", help=argparse.SUPPRESS)
    return p


def parse_args(argv=None):
    p = parser()
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps: expected at least 1, got {args.steps}")
    if args.warmup < 1:
        p.error(f"--warmup: expected at least 1 (the first step is timed apart), got {args.warmup}")
    return args


def _common(args):
    return ["--scene", args.scene, "--steps", str(args.steps), "--warmup", str(args.warmup),
            "--spconv-triton-module", args.spconv_triton_module]


def plan(args):
    """The parts (bench/part_runner.Part) that run, in order."""
    me = [sys.executable, "-m", "bench.gpu_profile"]
    parts = []

    def add(name, part, timeout, mode=None, env=None):
        argv = me + ["--run-part", part] + _common(args) + (["--mode", mode] if mode else [])
        parts.append(part_runner.Part(name, argv, timeout, {**COMPILED, **(env or {})}))

    for part in args.parts:
        if part == "step":
            for mode in args.modes:
                add(f"step-{mode}", "step", args.part_timeout, mode)
        elif part == "spconv":
            for mode in args.spconv_modes:
                add(f"spconv-{mode}", "spconv", args.spconv_timeout, mode,
                    {"SPCONV_ALLOW_TF32": "1" if mode == "fp32-tf32" else "0"})
        elif part == "spconv-triton":
            for mode in args.spconv_triton_modes:
                add(f"spconv-triton-{mode}", "spconv-triton", args.spconv_triton_timeout, mode)
        else:
            add(part, part, args.part_timeout if part in ("kernels", "gemm", "graph") else 30.0)
    return parts


def gpu_or_exit():
    """One clear line and status 2 where torch sees no CUDA GPU."""
    import torch
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else f"torch built for CUDA {torch.version.cuda}"
        print(f"gpu_profile: no CUDA GPU visible to torch ({build}); nothing was run.", file=sys.stderr)
        sys.exit(NO_GPU)
    return torch.cuda.get_device_name()


def summary(records):
    """A few lines for the log: the step times per library and mode, and each part's status."""
    lines = []
    for r in records:
        if r.get("record") == "step":
            lines.append(f"{r['library']:>14} {r['mode']:<13} {r['maps']:<6} gpu {r['gpu_ms']:.2f} ms, "
                         f"wall {r['wall_ms']:.2f} ms, host {r['host_ms']:.2f} ms, first step {r['first_step_s']:.1f} s")
        elif r.get("record") == "part" and r["status"] != "ok":
            lines.append(f"part {r['part']}: {r['status']}" + (f" (rc {r['rc']})" if r["rc"] is not None else ""))
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.run_part:
        from bench import gpu_profile_parts
        return gpu_profile_parts.run(args)
    parts = plan(args)
    if args.list_parts:
        for p in parts:
            print(f"{p.name}  (timeout {p.timeout:.0f} s)")
        return 0
    device = gpu_or_exit()
    os.makedirs(args.out, exist_ok=True)
    print(f"gpu_profile: {device}; {len(parts)} parts into {os.path.join(args.out, part_runner.RESULTS)}",
          file=sys.stderr, flush=True)
    closing = part_runner.run_parts(parts, args.out, args.budget)
    print(summary(part_runner.read_records(os.path.join(args.out, part_runner.RESULTS))), file=sys.stderr)
    return 0 if all(c["status"] == "ok" for c in closing) else 1


if __name__ == "__main__":
    sys.exit(main())
