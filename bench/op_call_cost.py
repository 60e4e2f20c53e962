"""Host cost of one accelerator op call through the dispatcher, against the same Python implementation
called directly, on the CUDA path (no GPU needed).

    python -m bench.op_call_cost [--loops 2000]

Every accelerator op is a Python function registered on the torch op (mx_sparse/_accelerator/
registration.py), so a call through ``torch.ops.mx_sparse`` crosses the dispatcher twice (into
``PythonKernelHolder`` and back). This bench runs in an interpreter with MXS_CUDA_ON_CPU=1 (started with
it when the caller's lacks it), Triton kernel calls stubbed as bench.host_cost stubs them, on bench.host_cost's
scene (400 voxels, 16 channels; the gathers on its submanifold map). It prints:

- per op: microseconds a call through ``torch.ops.mx_sparse`` and to the registered Python function
  directly, and their difference (the dispatcher's round trip); thread CPU time, the best of five loops
  of ``--loops`` calls each;
- two [C] float64 allocations against one [2, C] allocation split by ``unbind`` (what carving one
  buffer into the BatchNorm's outputs would cost instead);
- the mx_sparse op calls one VoxelBackBone8x training step makes (torch.profiler), by op, and their sum.
"""
import argparse
import collections
import gc
import json
import os
import subprocess
import sys
import time

from bench.host_cost import ROOT, SWITCHES, _positive

MARK = "MXS-OP-CALL-COST "


def _best_us(fn, loops):
    for _ in range(min(loops, 200)):
        fn()
    gc.collect()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            for _ in range(loops):
                fn()
            best = min(best, (time.thread_time() - start) / loops)
    finally:
        gc.enable()
    return 1e6 * best


def _step_op_calls(host_cost, removed):
    """{op name: calls} of one training step of bench.host_cost."""
    import torch
    from mx_sparse.models import VoxelBackBone8x
    data = host_cost.scene(400)
    torch.manual_seed(0)
    net = VoxelBackBone8x(data["features"].shape[1]).train()
    for _ in range(2):
        host_cost._one_step(net, data)
        removed.replay_from_start()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        host_cost._one_step(net, data)
    return dict(collections.Counter(e.name.split("::", 1)[1] for e in prof.events()
                                    if e.name.startswith("mx_sparse::")))


def measure(loops):
    """In this interpreter (MXS_CUDA_ON_CPU=1 set before mx_sparse was imported): the figures."""
    import torch
    from bench import host_cost
    torch.set_num_threads(1)
    removed = host_cost._Removed()
    host_cost._remove_triton_device_work(removed)
    from mx_sparse._accelerator import registration
    from mx_sparse.functional import build_subm_map
    direct = {**registration.ORCHESTRATION, **registration._cuda_primitives()}
    ops = torch.ops.mx_sparse
    step_op_calls = _step_op_calls(host_cost, removed)     # (first: the stub replays the step's map kernels in order)
    removed.recording = True            # the map below: its kernels run in the interpreter
    data = host_cost.scene(400)
    nbr = build_subm_map(data["indices"], data["spatial_shape"], 1, [3, 3, 3], [1, 1, 1])
    n, c = data["indices"].shape[0], 16
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(n, c, generator=g), torch.randn(n, c, generator=g)
    gamma, beta = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    running_mean, running_var = torch.zeros(c), torch.ones(c)
    weight = torch.randn(27, c, c, generator=g)
    with torch.no_grad():
        _, mean, invstd, scale, shift = ops.batch_norm_relu_forward(x, gamma, beta, running_mean, running_var,
                                                                    True, 0.1, 1e-3)
        calls = {
            "scale_shift_relu": (x, scale, shift),
            "batch_norm_relu_forward": (x, gamma, beta, running_mean, running_var, True, 0.1, 1e-3),
            "batch_norm_relu_backward": (dy, x, mean, invstd, gamma, scale, shift, True),
            "_gather_mm_one_group": (x, weight, nbr),
            "gather_mm": (x, weight, nbr, None, 1, True),
            "_gather_mm_backprop_filter_one_group": (x, dy, nbr),
            "gather_mm_backprop_filter": (x, dy, nbr, None, 1, True),
        }
        per_op = {}
        for name, args in calls.items():
            through, fn = getattr(ops, name).default, direct[name]
            per_op[name] = {"dispatcher_us": _best_us(lambda: through(*args), loops),
                            "direct_us": _best_us(lambda: fn(*args), loops)}
    f64 = torch.float64
    allocation = {"two_empty_us": _best_us(lambda: (torch.empty((c,), dtype=f64), torch.empty((c,), dtype=f64)), loops),
                  "empty_unbind_us": _best_us(lambda: torch.empty((2, c), dtype=f64).unbind(0), loops)}
    return {"voxels": n, "channels": c, "loops": loops, "ops": per_op, "allocation": allocation,
            "step_op_calls": step_op_calls}


def report(r) -> str:
    lines = [f"scene: {r['voxels']} voxels, {r['channels']} channels, MXS_CUDA_ON_CPU=1, Triton kernels stubbed; "
             f"best of 5 loops of {r['loops']} calls",
             "| op | through torch.ops us | direct us | dispatcher us |", "| --- | --- | --- | --- |"]
    for name, t in r["ops"].items():
        lines.append(f"| {name} | {t['dispatcher_us']:.1f} | {t['direct_us']:.1f} | "
                     f"{t['dispatcher_us'] - t['direct_us']:.1f} |")
    a = r["allocation"]
    lines.append(f"allocation: two [C] float64 {a['two_empty_us']:.2f} us, one [2, C] + unbind {a['empty_unbind_us']:.2f} us")
    step = r["step_op_calls"]
    lines.append("op calls per training step: " + ", ".join(f"{k}={v}" for k, v in sorted(step.items(), key=lambda kv: (-kv[1], kv[0])))
                 + f"; total={sum(step.values())}")
    return "\n".join(lines)


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", type=_positive, default=2000, help="calls per timed loop (default 2000)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.child:
        print(MARK + json.dumps(measure(args.loops)))
        return
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU", "TRITON_INTERPRET")}
    env.update(SWITCHES["cuda"])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-m", "bench.op_call_cost", "--child", "--loops", str(args.loops)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    for line in r.stdout.splitlines():
        if line.startswith(MARK):
            print(report(json.loads(line[len(MARK):])))
            return
    raise RuntimeError(f"bench.op_call_cost failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


if __name__ == "__main__":
    main()
