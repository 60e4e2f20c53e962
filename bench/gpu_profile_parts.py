"""The measurements of bench/gpu_profile.py, one function per part; each runs inside its own
subprocess (``python -m bench.gpu_profile --run-part NAME``) and appends its records with
part_runner.emit as it measures them. Needs a CUDA GPU (the runner checked for one).
"""
import contextlib
import importlib
import importlib.metadata
import os
import platform
import statistics
import subprocess
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench import kernel_table
from bench.part_runner import emit

GEMM_OPS = ("_gather_mm_one_group", "_gather_mm_backprop_filter_one_group")


# ----------------------------------------------------------------------------- the step

@contextlib.contextmanager
def precision(mode: str):
    """torch's switches for ``mode`` (restored after): TF32 only in fp32-tf32; autocast dtype
    returned for the amp modes; fp32-torchbn turns mx_sparse's fused BatchNorm+ReLU off."""
    import mx_sparse
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, mx_sparse.SparseSequential.fuse_bn_relu)
    matmul.allow_tf32 = cudnn.allow_tf32 = mode == "fp32-tf32"
    mx_sparse.SparseSequential.fuse_bn_relu = mode != "fp32-torchbn"
    try:
        yield {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(mode)
    finally:
        matmul.allow_tf32, cudnn.allow_tf32, mx_sparse.SparseSequential.fuse_bn_relu = saved


def train_step(net, make_input, autocast_dtype):
    """One training step: forward (under autocast in the amp modes), a loss, backward."""
    def step():
        net.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=autocast_dtype or torch.float16, enabled=autocast_dtype is not None):
            y = net(make_input())
            loss = (y.features.float() ** 2).mean()
        loss.backward()
    return step


def time_step(step, warmup: int, steps: int) -> dict:
    """First-step seconds (compilation, map building), then over ``steps`` steps the median wall
    (to the end of the GPU's work), host-until-return and CUDA-event GPU milliseconds."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first = time.perf_counter() - started
    for _ in range(warmup - 1):
        step()
    torch.cuda.synchronize()
    wall, host, gpu = [], [], []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        step()
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        gpu.append(start.elapsed_time(end))
    return {"first_step_s": round(first, 3), "wall_ms": statistics.median(wall), "host_ms": statistics.median(host),
            "gpu_ms": statistics.median(gpu), "gpu_ms_min": min(gpu), "steps": steps, "warmup": warmup}


def _scene(args):
    from bench.workloads import WORKLOADS
    work = {w.name: w for w in WORKLOADS}[f"second_{args.scene}"]
    data = work.make_input()
    return work, data, data["features"].cuda(), data["indices"].cuda()


def mx_inputs(data, feats, inds):
    """(fresh, cached): a new input tensor per call (the layers build every map again) or one
    input whose map cache the first step fills."""
    import mx_sparse

    def fresh():
        return mx_sparse.SparseConvTensor(feats, inds, data["spatial_shape"], data["batch_size"])
    cached = fresh()
    return fresh, lambda: cached


def part_step(args):
    work, data, feats, inds = _scene(args)
    net = work.build_mx().cuda().train()
    fresh, cached = mx_inputs(data, feats, inds)
    with precision(args.mode) as amp:
        for maps, make_input in (("fresh", fresh), ("cached", cached)):
            timing = time_step(train_step(net, make_input, amp), args.warmup, args.steps)
            emit({"record": "step", "library": "mx_sparse", "mode": args.mode, "maps": maps, "scene": args.scene,
                  "voxels": int(inds.shape[0]), **timing})


# ----------------------------------------------------------------------------- the kernel table

def part_kernels(args):
    from torch.profiler import ProfilerActivity, profile
    from torch.autograd import DeviceType
    work, data, feats, inds = _scene(args)
    net = work.build_mx().cuda().train()
    fresh, _ = mx_inputs(data, feats, inds)
    with precision("fp32-ieee") as amp:
        step = train_step(net, fresh, amp)
        for _ in range(args.warmup):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            wall_us = (time.perf_counter() - t0) * 1e6
    events = list(prof.events())
    kernels = [(e.name, e.time_range.start, e.time_range.end) for e in events
               if e.device_type == DeviceType.CUDA and "Memcpy" not in e.name and "Memset" not in e.name]
    copies = [(e.name, e.time_range.start, e.time_range.end) for e in events
              if e.device_type == DeviceType.CUDA and ("Memcpy" in e.name or "Memset" in e.name)]
    result = kernel_table.table(kernels + copies)
    emit({"record": "kernels", "mode": "fp32-ieee", "maps": "fresh", "scene": args.scene, "wall_us": round(wall_us, 1),
          **{k: v for k, v in result.items() if k != "kernels"},
          **kernel_table.host_waits(e.name for e in events)})
    for row in result["kernels"]:
        emit({"record": "kernel", "scene": args.scene, **row})


# ----------------------------------------------------------------------------- GEMM launches replayed

class GemmRecorder(TorchDispatchMode):
    """Keeps the operands of every GEMM primitive call of one step (the ops the orchestration
    calls per group through torch.ops.mx_sparse), with the layer whose forward ran it."""

    def __init__(self, net):
        super().__init__()
        import mx_sparse
        self.calls, self.layer, self.hooks = [], None, []
        for name, mod in net.named_modules():
            if isinstance(mod, mx_sparse.nn.conv.SparseConvolution):
                self.hooks.append(mod.register_forward_pre_hook(lambda m, i, n=name: setattr(self, "layer", n)))
                self.hooks.append(mod.register_forward_hook(lambda m, i, o: setattr(self, "layer", None)))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name in GEMM_OPS:
            kind = "dW" if name == GEMM_OPS[1] else ("fwd" if self.layer is not None else "dX")
            self.calls.append({"kind": kind, "layer": self.layer, "op": func, "args": args})
        return func(*args, **(kwargs or {}))


def _macs(call):
    from mx_sparse._cuda import launch, schedule
    a, b, nbr = call["args"][:3]     # (a dW call may add the activation's scale and shift)
    cin = a.shape[1]
    cout = b.shape[2] if call["kind"] != "dW" else b.shape[1]
    useful = int((nbr >= 0).sum()) * cin * cout
    issued_fn = schedule.filter_issued_macs if call["kind"] == "dW" else schedule.gather_issued_macs
    issued = issued_fn(nbr, a.shape[0], cin, cout, launch.operand_type(a.dtype))
    return cin, cout, useful, issued


def _replay_us(call, repeats=20):
    op, args = call["op"], call["args"]
    op(*args)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        op(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / repeats


def part_gemm(args):
    work, data, feats, inds = _scene(args)
    net = work.build_mx().cuda().train()
    fresh, _ = mx_inputs(data, feats, inds)
    with precision("fp32-ieee") as amp:
        step = train_step(net, fresh, amp)
        step()
        recorder = GemmRecorder(net)
        with recorder:
            step()
        torch.cuda.synchronize()
    for h in recorder.hooks:
        h.remove()
    # a backward call goes to the latest layer whose forward had the same map (backward runs in reverse)
    forward_maps = [(c["layer"], c["args"][2]) for c in recorder.calls if c["kind"] == "fwd"]
    for i, call in enumerate(recorder.calls):
        if call["layer"] is None:
            call["layer"] = next((l for l, nbr in reversed(forward_maps) if nbr.shape == call["args"][2].shape), "?")
        cin, cout, useful, issued = _macs(call)
        record = {"record": "gemm", "index": i, "layer": call["layer"], "kind": call["kind"], "rows": call["args"][2].shape[0],
                  "kvol": call["args"][2].shape[1], "cin": cin, "cout": cout, "useful_gmac": useful / 1e9,
                  "issued_gmac": issued / 1e9}
        for mode in ("fp32-ieee", "fp32-tf32"):
            with precision(mode):
                us = _replay_us(call)
            key = mode.split("-")[1]
            record[f"{key}_us"] = us
            record[f"{key}_useful_tflops"] = 2 * useful / (us * 1e-6) / 1e12 if us else 0.0
            record[f"{key}_issued_tflops"] = 2 * issued / (us * 1e-6) / 1e12 if us else 0.0
        emit(record)


# ----------------------------------------------------------------------------- CUDA graph

def part_graph(args):
    work, data, feats, inds = _scene(args)
    net = work.build_mx().cuda().train()
    _, cached = mx_inputs(data, feats, inds)
    with precision("fp32-ieee") as amp:
        step = train_step(net, cached, amp)
        eager = time_step(step, args.warmup, args.steps)
        record = {"record": "graph", "mode": "fp32-ieee", "maps": "cached", "scene": args.scene,
                  "eager_gpu_ms": eager["gpu_ms"], "eager_wall_ms": eager["wall_ms"], "eager_host_ms": eager["host_ms"]}
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            replay = time_step(graph.replay, args.warmup, args.steps)
            record.update(captured=True, replay_gpu_ms=replay["gpu_ms"], replay_wall_ms=replay["wall_ms"],
                          eager_minus_replay_ms=eager["wall_ms"] - replay["wall_ms"])
        except Exception as e:      # a host read inside the step refuses capture: recorded, the part ends
            record.update(captured=False, error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    emit(record)


# ----------------------------------------------------------------------------- spconv, spconv-Triton

def _spconv_net(sp, work):
    """bench/spconv_nets' network built on ``sp`` (spconv.pytorch, or spconv-Triton's drop-in
    module: the definitions look their layer classes up in the module global ``sp`` when built)."""
    from bench import spconv_nets
    shipped = spconv_nets.sp
    spconv_nets.sp = sp
    try:
        return spconv_nets.NETS[work.net](*work.net_args)
    finally:
        spconv_nets.sp = shipped


def pin_autotuners():
    """Every triton.autotune made after this call keeps its first configuration only (no
    benchmarking of variants); returns a counter of the configurations dropped."""
    from triton.runtime import autotuner
    dropped = {"autotuners": 0, "configs_dropped": 0}
    original = autotuner.Autotuner.__init__

    def pinned(self, fn, arg_names, configs, *a, **k):
        dropped["autotuners"] += 1
        dropped["configs_dropped"] += max(0, len(configs) - 1)
        original(self, fn, arg_names, list(configs)[:1], *a, **k)
    autotuner.Autotuner.__init__ = pinned
    return dropped


def _their_step(args, library):
    work, data, feats, inds = _scene(args)
    pinned = None
    if library == "spconv-triton":
        pinned = pin_autotuners()                  # before the module defines its kernels
        sp = importlib.import_module(args.spconv_triton_module)
    else:
        sp = importlib.import_module("spconv.pytorch")
    from bench import spconv_nets
    mine = work.build_mx().train()
    theirs = _spconv_net(sp, work)
    spconv_nets.copy_weights(mine, theirs)
    theirs = theirs.cuda().train()

    def make_input():
        return sp.SparseConvTensor(feats, inds, data["spatial_shape"], data["batch_size"])
    with precision(args.mode) as amp:
        timing = time_step(train_step(theirs, make_input, amp), args.warmup, args.steps)
    record = {"record": "step", "library": library, "mode": args.mode, "maps": "fresh", "scene": args.scene,
              "voxels": int(inds.shape[0]), **timing}
    if pinned is not None:
        record.update(pinned)
    if library == "spconv":
        record["SPCONV_ALLOW_TF32"] = os.environ.get("SPCONV_ALLOW_TF32")
    emit(record)


def part_spconv(args):
    _their_step(args, "spconv")


def part_spconv_triton(args):
    _their_step(args, "spconv-triton")


# ----------------------------------------------------------------------------- environment, clocks

NVIDIA_SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem",
                     "power.draw", "power.limit", "temperature.gpu", "clocks_throttle_reasons.active")


def nvidia_smi() -> dict:
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"nvidia_smi_error": f"{type(e).__name__}: {e}"}
    if proc.returncode:
        return {"nvidia_smi_error": proc.stderr.strip()[-300:]}
    values = [v.strip() for v in proc.stdout.splitlines()[0].split(",")]
    return dict(zip(NVIDIA_SMI_FIELDS, values))


def _versions() -> dict:
    found = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
             "cudnn": torch.backends.cudnn.version()}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in ("triton", "mx_sparse", "mx-sparse", "numpy") or name.startswith(("spconv", "cumm")):
            found[name] = dist.version
    return found


def part_env(args):
    import mx_sparse  # noqa: F401  (its import registers the ops: a broken install shows here)
    props = torch.cuda.get_device_properties(0)
    matmul = torch.backends.cuda.matmul
    emit({"record": "env", "gpu": props.name, "capability": f"{props.major}.{props.minor}",
          "sms": props.multi_processor_count, "memory_gib": round(props.total_memory / 2**30, 1),
          "versions": _versions(), "nvidia_smi": nvidia_smi(),
          "switches": {"matmul.allow_tf32": matmul.allow_tf32, "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                       "float32_matmul_precision": torch.get_float32_matmul_precision(),
                       "matmul.allow_fp16_reduced_precision_reduction": matmul.allow_fp16_reduced_precision_reduction,
                       "matmul.allow_bf16_reduced_precision_reduction": matmul.allow_bf16_reduced_precision_reduction,
                       "cudnn.benchmark": torch.backends.cudnn.benchmark},
          "environment": {k: v for k, v in os.environ.items()
                          if k.startswith(("MXS_", "TRITON_", "SPCONV_", "CUDA_", "NVIDIA_TF32"))},
          "scene": args.scene})


def part_clocks(args):
    emit({"record": "clocks", "nvidia_smi": nvidia_smi()})


PARTS = {"env": part_env, "step": part_step, "kernels": part_kernels, "gemm": part_gemm, "graph": part_graph,
         "spconv": part_spconv, "spconv-triton": part_spconv_triton, "clocks": part_clocks}


def run(args) -> int:
    PARTS[args.run_part](args)
    return 0
