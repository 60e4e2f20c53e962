"""The prepared check for a machine with a CUDA GPU (never run by this project's CI, which has none).

    bash tools/gpu_check.sh [options]          # or: python -m bench.gpu_check [options]

In one run: (1) installs the comparison libraries from local wheels if given (offline:
``pip install --no-index --find-links DIR``; wheel directories from --wheels or the
MXS_GPU_CHECK_WHEELS environment variable, ':'-separated), (2) runs ``pytest -m cuda`` (the CUDA
tests, tests/cuda/test_gpu.py and friends), (3) times a VoxelBackBone8x training step (forward +
backward) with mx_sparse, spconv 2.x (``spconv.pytorch``, e.g. spconv-cu120 / -cu121 / -cu124)
and spconv-Triton (module from --spconv-triton-module) where importable, on the same scene and
weights, and prints the step times, their ratios, TFLOP/s per mx_sparse layer (useful MACs x 2
over the layer's forward time) and whether the mx_sparse step can be captured in a CUDA graph.
A JSON record of everything goes to --out.

Without a CUDA GPU it exits with status 2 and says so, before installing or running anything.
"""
import argparse
import faulthandler
import json
import os
import signal
import statistics
import subprocess
import sys
import time

SCENES = ("kitti_b1", "kitti_b4", "nusc_b1")
DTYPES = ("fp32", "fp16", "bf16")
NO_GPU = 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scene", action="append", choices=SCENES,
                        help="scene(s) to time (repeatable; default kitti_b1)")
    parser.add_argument("--dtype", default="fp32", choices=DTYPES, help="features and weights dtype (default fp32)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per library (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--wheels", default=os.environ.get("MXS_GPU_CHECK_WHEELS", ""),
                        help="':'-separated directories of wheels to install offline "
                             "(default: $MXS_GPU_CHECK_WHEELS)")
    parser.add_argument("--install", action="append", default=[],
                        help="a requirement to install from those directories (repeatable), e.g. spconv-cu120")
    parser.add_argument("--spconv-triton-module", default="spconv_triton.pytorch",
                        help="import name of spconv-Triton's spconv.pytorch equivalent (default spconv_triton.pytorch)")
    parser.add_argument("--skip-tests", action="store_true", help="do not run pytest -m cuda")
    parser.add_argument("--out", default="gpu_check.json", help="JSON record (default gpu_check.json)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps: expected at least 1, got {args.steps}")
    if args.warmup < 0:
        parser.error(f"--warmup: expected 0 or more, got {args.warmup}")
    dirs = [d for d in args.wheels.split(":") if d]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        parser.error(f"--wheels: not a directory: {', '.join(missing)}")
    if args.install and not dirs:
        parser.error("--install needs --wheels (or MXS_GPU_CHECK_WHEELS): installs are offline only")
    args.wheel_dirs = dirs
    args.scene = args.scene or ["kitti_b1"]
    return args


def require_gpu():
    """Exits with status 2 and a clear message where torch sees no CUDA GPU."""
    import torch
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else f"torch built for CUDA {torch.version.cuda}"
        print(f"gpu_check: no CUDA GPU visible to torch ({build}); this check needs one. Nothing was run.",
              file=sys.stderr)
        sys.exit(NO_GPU)
    return torch.cuda.get_device_name()


def install(args):
    if not args.install:
        return []
    links = [x for d in args.wheel_dirs for x in ("--find-links", d)]
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", *links, *args.install]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return args.install


def run_cuda_tests():
    cmd = [sys.executable, "-m", "pytest", "-m", "cuda", "tests", "-q", "-p", "no:cacheprovider"]
    print("+", " ".join(cmd), flush=True)
    # tests/conftest.py turns Triton's interpreter on unless told otherwise: on a GPU the
    # compiled kernels are what is checked, so the switch is set off (and the CPU emulation off).
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU")}
    env["TRITON_INTERPRET"] = "0"
    return subprocess.run(cmd, env=env).returncode


def _libraries(args):
    """{name: spconv.pytorch-like module} of the comparison libraries that import."""
    import importlib
    found = {}
    for name, module in (("spconv", "spconv.pytorch"), ("spconv-triton", args.spconv_triton_module)):
        try:
            found[name] = importlib.import_module(module)
        except Exception as e:          # not installed, or its CUDA build does not match: reported, not fatal
            print(f"{name}: not importable as {module} ({type(e).__name__}: {e})")
    return found


def _progress(what, started):
    """One line per stage as it ends (a slow stage on a GPU, e.g. kernel compilation, shows where)."""
    print(f"gpu_check: {what} ({time.perf_counter() - started:.1f} s)", flush=True)


def _time_steps(step, warmup, steps, name="mx_sparse"):
    """Median milliseconds of ``steps`` steps after ``warmup`` untimed ones; the first step (kernel
    compilation, autotuning, map building) is timed apart and reported."""
    import torch
    started = time.perf_counter()
    for i in range(warmup):
        step()
        if i == 0:
            torch.cuda.synchronize()
            _progress(f"{name}: first step", started)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    _progress(f"{name}: {warmup} + {steps} steps, median {statistics.median(times):.2f} ms", started)
    return statistics.median(times)


def _train_step(net, make_input):
    def step():
        net.zero_grad(set_to_none=True)
        y = net(make_input())
        (y.features.float() ** 2).mean().backward()
    return step


def _layer_times(net, make_input):
    """{layer: (forward ms, useful MACs)} of mx_sparse's conv layers, from one step."""
    import torch
    import mx_sparse
    from mx_sparse import functional
    events, macs, current = {}, {}, [None]
    original = functional.gather_mm

    def counted(features, weight, nbr, *rest):
        if current[0] is not None:
            macs[current[0]] = (nbr >= 0).sum() * weight.shape[1] * weight.shape[2]
        return original(features, weight, nbr, *rest)

    hooks = []
    for name, mod in net.named_modules():
        if isinstance(mod, mx_sparse.conv.SparseConvolution):
            def pre(m, inp, n=name):
                current[0] = n
                events[n] = [torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)]
                events[n][0].record()

            def post(m, inp, out, n=name):
                events[n][1].record()
                current[0] = None
            hooks += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    functional.gather_mm = counted
    try:
        _train_step(net, make_input)()
        torch.cuda.synchronize()
    finally:
        functional.gather_mm = original
        for h in hooks:
            h.remove()
    return {n: (e[0].elapsed_time(e[1]), int(macs.get(n, 0))) for n, e in events.items()}


def _capturable(step):
    """Whether one training step captures into a CUDA graph (and the reason where not)."""
    import torch
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        graph.replay()
        torch.cuda.synchronize()
        return True, ""
    except Exception as e:
        torch.cuda.synchronize()
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _spconv_net(sp, work):
    """bench/spconv_nets' network built on ``sp`` (spconv.pytorch, or spconv-Triton's drop-in
    module: the definitions look their layer classes up in the module global ``sp`` when built).
    bench/spconv_nets imports spconv itself, so spconv-Triton is compared where spconv imports too."""
    from bench import spconv_nets
    shipped = spconv_nets.sp
    spconv_nets.sp = sp
    try:
        return spconv_nets.NETS[work.net](*work.net_args)
    finally:
        spconv_nets.sp = shipped


def benchmark(scene, args, libraries):
    import torch
    import mx_sparse
    from bench.workloads import WORKLOADS
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    work = {w.name: w for w in WORKLOADS}[f"second_{scene}"]
    data = work.make_input()
    feats = data["features"].cuda().to(dtype)
    inds = data["indices"].cuda()
    net = work.build_mx().cuda().to(dtype).train()

    def mx_input():
        return mx_sparse.SparseConvTensor(feats, inds, data["spatial_shape"], data["batch_size"])
    record = {"scene": scene, "voxels": int(inds.shape[0]), "dtype": args.dtype}
    step = _train_step(net, mx_input)
    record["mx_sparse_ms"] = _time_steps(step, args.warmup, args.steps)
    started = time.perf_counter()
    layers = _layer_times(net, mx_input)
    _progress("mx_sparse: per-layer forward times", started)
    record["layers"] = {n: {"forward_ms": t, "useful_gmac": m / 1e9, "tflops": 2 * m / (t * 1e-3) / 1e12 if t else 0}
                        for n, (t, m) in layers.items()}
    # printed at once: a comparison library that compiles for minutes (spconv-Triton's first step
    # ran past 100 s on an H100) must not keep the figures measured so far from the log
    print("\n".join(_layer_lines(record)), flush=True)
    for name, sp in libraries.items():
        try:
            theirs = _spconv_net(sp, work)
            from bench import spconv_nets
            spconv_nets.copy_weights(net, theirs)
            theirs = theirs.cuda().to(dtype).train()
            their_step = _train_step(theirs, lambda: sp.SparseConvTensor(feats, inds, data["spatial_shape"],
                                                                         data["batch_size"]))
            ms = _time_steps(their_step, args.warmup, args.steps, name)
            record[f"{name}_ms"] = ms
            record[f"mx_sparse_over_{name}"] = record["mx_sparse_ms"] / ms
        except Exception as e:
            record[f"{name}_error"] = f"{type(e).__name__}: {e}"
    # Last: a refused capture can leave the CUDA context unusable for what would follow.
    started = time.perf_counter()
    record["cuda_graph"], record["cuda_graph_error"] = _capturable(step)
    _progress(f"mx_sparse: CUDA graph capture {'ok' if record['cuda_graph'] else 'refused'}", started)
    return record


def report(record):
    lines = [f"{record['scene']} ({record['voxels']} voxels, {record['dtype']}): mx_sparse step "
             f"{record['mx_sparse_ms']:.2f} ms; CUDA graph capture: "
             f"{'yes' if record['cuda_graph'] else 'no (' + record['cuda_graph_error'] + ')'}"]
    for name in ("spconv", "spconv-triton"):
        if f"{name}_ms" in record:
            lines.append(f"  {name}: {record[name + '_ms']:.2f} ms; mx_sparse / {name} = "
                         f"{record['mx_sparse_over_' + name]:.2f}")
        elif f"{name}_error" in record:
            lines.append(f"  {name}: failed ({record[name + '_error']})")
    return "\n".join(lines + _layer_lines(record))


def _layer_lines(record):
    lines = ["  | layer | forward ms | useful GMAC | TFLOP/s |"]
    for n, l in record["layers"].items():
        lines.append(f"  | {n} | {l['forward_ms']:.3f} | {l['useful_gmac']:.3f} | {l['tflops']:.2f} |")
    return lines


def main(argv=None):
    args = parse_args(argv)
    # `timeout -s USR1 ...` (or kill -USR1) prints where a run that seems stuck is, and it goes on.
    faulthandler.register(signal.SIGUSR1)
    device = require_gpu()
    result = {"device": device, "installed": install(args), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    result["pytest_cuda_rc"] = None if args.skip_tests else run_cuda_tests()
    libraries = _libraries(args)
    result["records"] = [benchmark(scene, args, libraries) for scene in args.scene]
    for record in result["records"]:
        print(report(record))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"gpu_check: {device}; pytest -m cuda rc={result['pytest_cuda_rc']}; record in {args.out}")
    return 1 if result["pytest_cuda_rc"] else 0


if __name__ == "__main__":
    sys.exit(main())
