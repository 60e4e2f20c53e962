"""Host cost of one training step on the three code paths, same scene, one run (no GPU / NPU needed).

    python -m bench.host_cost [--voxels 400] [--repeats 7] [--paths cpu,cuda,npu] [--json out.json]

The scene: the ``--voxels`` voxels of a generated KITTI scene nearest the sensor (a crop, batch 1);
the step: VoxelBackBone8x forward + backward (loss.backward()), one thread, fresh maps every step
(a new SparseConvTensor on a copy of the indices, as a new batch from a loader: nothing the
builders vouched for is reused); the median over ``--repeats`` steps after two warm-up steps, with
Python's garbage collector run before and held off during each timed step (every path): the
collection walks every object of the process and leaves the caches cold, so each timed step
starts as after a long pause, which charges each path for the breadth of the code it runs. A
second table times ``--repeats`` more steps back to back (one collection before them, none among
them, as ``timeit`` does): a training loop's steady state, where each step starts with the caches
the previous one left. Times are
the CPU time of the step's thread (``time.thread_time``; torch runs one thread here, autograd's
CPU work included): other processes on a loaded machine do not count, waits would not either
(the host reads of the accelerator paths wait for nothing on this machine).
Each path runs in its own interpreters (the switches are read at import), ``--seeds`` of them, with
Python's string hashing seeded 0, 1, ... (PYTHONHASHSEED, so that a run repeats what it can
control): a path's host time moves by up to 20% from one interpreter to the next, more than
within one (the CUDA path's steps back to back, 400 voxels: 4.2-5.8 ms over a dozen interpreters,
two under the same seed 0.6 ms apart), so each time printed is the median over the interpreters,
every path under the same seeds:

- ``cpu``:  the C++ CPU backend, the whole step with its real compute;
- ``cuda``: MXS_CUDA_ON_CPU=1, the CUDA path's orchestration and Triton launch code, with the
  kernels' device work removed: every Triton kernel call (``kernel[grid](...)``) is a stub,
  except the map primitives' (the maps are built from their outputs), which run in Triton's
  interpreter in the first warm-up step and are replayed from a recording afterwards;
- ``npu``:  MXS_NPU_ON_CPU=1, the same orchestration with the AscendC emulator's launches
  (``mx_sparse.runtime.ascend._call``) removed the same way: the gathers' are stubs, the map primitives'
  run in the emulator in the first warm-up step and are replayed from a recording afterwards (an
  emulated launch's thread per AI core would leave the host's caches cold around it).

What is left is the host's time: Python orchestration, torch operators (each a kernel launch on a
device, here run on tiny CPU tensors: their compute counts, e.g. a sort of a few thousand keys,
~20 us, which a GPU would run as device work), autograd. Per path one more step, untimed, counts
(with bench.host_ops' TorchDispatchMode) the torch operators that launch a kernel, the
device-kernel launches (Triton / emulator; C++ op calls on the CPU backend) and the host reads.
After the back-to-back table, two more say where each path's time goes: as many more steps, timed
per phase (the layers' map lookups and builds, loss.backward(), the rest), and the map phase per
layer. The last line: ``ratios: cuda=<x> npu=<y>`` (host ms / the CPU backend's step ms, the
headline's cold steps).
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("cpu", "cuda", "npu")
SWITCHES = {"cpu": {}, "cuda": {"MXS_CUDA_ON_CPU": "1", "TRITON_INTERPRET": "1"}, "npu": {"MXS_NPU_ON_CPU": "1"}}
MARK = "MXS-HOST-COST "
# The Triton kernel modules whose kernels build the maps (run, their time taken out); every other
# Triton kernel is stubbed.
MAP_KERNEL_MODULES = ("mx_sparse._cuda.map_kernels",)


class _Removed:
    """Device work taken out of the step: seconds spent in device work that ran (subtracted from
    the step's time), and the map kernels' recorded results (see _remove_triton_device_work)."""

    def __init__(self):
        self.seconds, self.launches = 0.0, 0
        self.recording, self.recorded, self.replayed = True, [], 0

    def run_timed(self, fn, *args, **kwargs):
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.thread_time() - start

    def replay_from_start(self):
        """The next map-kernel launches take their results from the recording, in order."""
        self.recording, self.replayed = False, 0


def _remove_triton_device_work(removed):
    """launch.run's host code runs as it is; the kernel it calls is a stand-in. The map kernels
    run in Triton's interpreter during the first (warm-up) step, and their operands are recorded
    after each launch; from then on (the steps are identical) a launch copies the recorded
    operands back instead of interpreting the kernel (millions of Python objects per launch,
    whose allocation and freeing would otherwise leak into the host time around it). Both
    stand for the kernel's device work: their time is taken out of the step's, as the
    emulator's is on the NPU path (the copies and the mode switch around them, ~20 us a launch,
    had been counted as host time)."""
    import torch
    from mx_sparse._cuda import launch
    run = launch.run

    class Kernel:
        def __init__(self, kernel):
            self.kernel = kernel
            self.runs = getattr(kernel, "__module__", "") in MAP_KERNEL_MODULES or \
                getattr(getattr(kernel, "fn", None), "__module__", "") in MAP_KERNEL_MODULES

        def __getitem__(self, grid):
            def start(*args, **kwargs):
                removed.launches += 1
                if self.runs:
                    removed.run_timed(self.device_work, grid, args, kwargs)
            return start

        def device_work(self, grid, args, kwargs):
            """The map kernel's work: interpreted (recording), or its recorded results copied back."""
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            with torch.utils._python_dispatch._disable_current_modes():
                if removed.recording:
                    self.kernel[grid](*args, **kwargs)
                    removed.recorded.append([t.clone() for t in tensors])
                else:
                    for t, value in zip(tensors, removed.recorded[removed.replayed]):
                        t.copy_(value)
                    removed.replayed += 1

    # one stand-in per kernel, made on its first launch and kept (as Triton keeps its kernel objects)
    stand_ins = {}

    def stubbed(kernel, *args, **kwargs):
        stand_in = stand_ins.get(kernel)
        if stand_in is None:
            stand_in = stand_ins[kernel] = Kernel(kernel)
        return run(stand_in, *args, **kwargs)

    launch.run = stubbed


def _conv_out_slot_volume(a):
    """J of a mxs_emu_conv_out_keys call (kernel, stride, dilation arrays at a[5], a[6], a[8])."""
    from mx_sparse._core import contract  # mx_sparse is imported after the path's switches are set
    return contract.conv_out_slot_volume(a[5], a[6], a[8])


# The map primitives' outputs, from the arguments of their emulator call (runtime/ascend.py's
# _call: raw addresses and sizes): [(address, bytes)].
_EMULATOR_OUTPUTS = {
    "mxs_emu_sorted_key_lookup": lambda a: [(a[8], a[1] * a[5] * 4)],                  # int32 [S, K]
    "mxs_emu_conv_out_keys": lambda a: [(a[9], a[1] * _conv_out_slot_volume(a) * 8)],   # int64 [J*N]
    "mxs_emu_unique_sorted_keys": lambda a: [(a[2], a[1] * 8), (a[3], 4)],              # int64 [C], int32 [1]
}


def _remove_emulator_device_work(removed):
    """runtime/ascend.py's _call (one launch: the aclnn call on the NPU) is a stand-in, the host
    code around it runs as it is. The gathers' are stubs (outputs left as allocated). The map
    primitives run in the emulator during the first (warm-up) step, and their outputs are
    recorded after each launch; from then on (the steps are identical) a launch copies the
    recorded bytes back instead of emulating the kernel, as the CUDA path's map kernels: an
    emulated launch starts and joins one thread per AI core (~40 threads, 8 MB stacks mapped and
    unmapped), which leaves the host thread's caches cold, ~0.1 ms of host time after each launch
    that no NPU launch costs. The copies (a few KB) stand for the launch's device work and are
    timed out with it, as the CUDA path's."""
    import ctypes
    from mx_sparse.runtime import ascend
    call = ascend._call

    def stubbed(fn_name, *args):
        removed.launches += 1
        outputs = _EMULATOR_OUTPUTS.get(fn_name)
        if outputs is None:      # the compute kernels (gathers): outputs left as allocated
            return None
        if removed.recording:
            removed.run_timed(call, fn_name, *args)
            removed.recorded.append((fn_name, [ctypes.string_at(address, size) for address, size in outputs(args)]))
            return None
        return removed.run_timed(replay, fn_name, outputs(args))

    def replay(fn_name, outputs):
        """The launch's recorded outputs copied back (the device work it stands for: timed out)."""
        name, values = removed.recorded[removed.replayed] if removed.replayed < len(removed.recorded) else (None, [])
        if name != fn_name or [len(v) for v in values] != [size for _, size in outputs]:
            raise RuntimeError(f"bench.host_cost: launch {removed.replayed} of the step is {fn_name} with outputs of "
                               f"{[size for _, size in outputs]} bytes, the recording's {name} of "
                               f"{[len(v) for v in values]}: the steps differ, the recording does not apply")
        for (address, _), value in zip(outputs, values):
            ctypes.memmove(address, value, len(value))
        removed.replayed += 1

    ascend._call = stubbed


def scene(voxels):
    from bench.workloads import nearest_of_scene
    return nearest_of_scene("kitti", voxels)()


def _one_step(net, data):
    import mx_sparse
    x = mx_sparse.SparseConvTensor(data["features"], data["indices"].clone(), data["spatial_shape"], 1)
    y = net(x)
    (y.features.float() ** 2).mean().backward()
    net.zero_grad(set_to_none=True)


def _counts(path, net, data):
    """torch operators, device launches and host reads of one step (bench.host_ops' counter)."""
    from bench import host_ops
    if path == "cpu":
        inline, opaque = {}, set()
    else:
        inline, opaque = host_ops._implementations(path)
    reads = host_ops._count_host_reads()
    from mx_sparse._cuda import launch
    triton_before = sum(launch.launches.values())
    counter = host_ops.HostOpCounter(inline, opaque)
    with counter:
        _one_step(net, data)
    return {"torch_ops": sum(counter.ops.values()), "no_kernel_ops": sum(counter.views.values()),
            "triton_launches": sum(launch.launches.values()) - triton_before,
            "emulator_launches": sum(counter.kernels.values()) if path == "npu" else 0,
            "cpp_op_calls": sum(counter.kernels.values()) if path == "cpu" else 0,
            "host_reads": sum(reads.values()) + counter.scalar_reads}


def measure(path, voxels, repeats):
    """In this interpreter (its switches set before mx_sparse was imported): the path's figures."""
    import torch
    torch.set_num_threads(1)
    removed = _Removed()
    if path == "cuda":
        _remove_triton_device_work(removed)
    elif path == "npu":
        _remove_emulator_device_work(removed)
    from mx_sparse.models import VoxelBackBone8x
    data = scene(voxels)
    torch.manual_seed(0)
    net = VoxelBackBone8x(data["features"].shape[1]).train()
    for _ in range(2):
        _one_step(net, data)
        removed.replay_from_start()
    times = [_timed_step(net, data, removed) for _ in range(repeats)]
    steady = _back_to_back(net, data, removed, repeats)
    phases, map_layers = _phases(net, data, removed, repeats)
    removed.replay_from_start()
    return {"path": path, "voxels": int(data["indices"].shape[0]), "host_ms": 1e3 * statistics.median(times),
            "back_to_back_ms": 1e3 * statistics.median(steady),
            "phases_ms": phases, "map_layers_us": map_layers, **_counts(path, net, data)}


def _step_seconds(net, data, removed):
    """The host seconds of one step: its thread's CPU time less the device work removed from it."""
    removed.seconds = 0.0
    removed.replay_from_start()
    start = time.thread_time()
    _one_step(net, data)
    return time.thread_time() - start - removed.seconds


def _timed_step(net, data, removed):
    """``_step_seconds`` of one step after a full collection, none inside it (any path): a
    collection would land in whatever host code runs next. The collection walks every Python
    object of the process (~300 000 with torch and triton imported, ~150 ms here), which leaves
    the caches cold: each step starts as after a long pause."""
    gc.collect()
    gc.disable()
    try:
        return _step_seconds(net, data, removed)
    finally:
        gc.enable()


def _back_to_back(net, data, removed, repeats):
    """``_step_seconds`` of ``repeats`` steps run one after another, one collection before them and
    none among them (as timeit holds the collector off): a training loop's steady state, each step
    starting with the caches the previous one left. [seconds]"""
    gc.collect()
    gc.disable()
    try:
        return [_step_seconds(net, data, removed) for _ in range(repeats)]
    finally:
        gc.enable()


PHASES = ("maps", "backward", "rest")


def _phases(net, data, removed, repeats):
    """Where a step's host time goes, from ``repeats`` more steps timed the same way with two
    wrappers in place (a few microseconds a step, so not in the headline figure): the layers' map
    lookups and builds (SparseConvolution._indice_data, reuse by indice_key included), the
    backward (loss.backward(): autograd and every backward kernel), and the rest (the forward's
    gathers and BatchNorms, the loss, zero_grad). (medians per phase in ms, [(layer, median us of
    its map lookup or build)] in call order)"""
    import torch
    from mx_sparse.nn.conv import SparseConvolution
    maps, backwards = [], []      # this step's (layer, seconds) of map lookups and builds; backward seconds

    def timed(fn, record):
        def call(*args, **kwargs):
            start, removed_before = time.thread_time(), removed.seconds
            try:
                return fn(*args, **kwargs)
            finally:
                record(args, time.thread_time() - start - (removed.seconds - removed_before))
        return call

    def layer_map(args, seconds):
        maps.append((f"{type(args[0]).__name__} {args[0].indice_key}", seconds))

    indice_data, backward = SparseConvolution._indice_data, torch.Tensor.backward
    SparseConvolution._indice_data = timed(indice_data, layer_map)
    torch.Tensor.backward = timed(backward, lambda args, seconds: backwards.append(seconds))
    samples, layers = {phase: [] for phase in PHASES}, []
    try:
        for _ in range(repeats):
            maps.clear()
            backwards.clear()
            total = _timed_step(net, data, removed)
            samples["maps"].append(sum(seconds for _, seconds in maps))
            samples["backward"].append(sum(backwards))
            samples["rest"].append(total - samples["maps"][-1] - samples["backward"][-1])
            layers.append(list(maps))
    finally:
        SparseConvolution._indice_data, torch.Tensor.backward = indice_data, backward
    removed.replay_from_start()
    per_layer = [(step[0][0], 1e6 * statistics.median(seconds for _, seconds in step))
                 for step in zip(*layers)]
    return {phase: 1e3 * statistics.median(values) for phase, values in samples.items()}, per_layer


def run_path(path, voxels, repeats, seed=0):
    """``measure`` in a fresh interpreter with the path's switches (and only those) set, and
    Python's string hashing seeded with ``seed`` (PYTHONHASHSEED)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU", "TRITON_INTERPRET")}
    env.update(SWITCHES[path])
    env["PYTHONHASHSEED"] = str(seed)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-m", "bench.host_cost", "--child", path, "--voxels", str(voxels),
                        "--repeats", str(repeats)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    for line in r.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"bench.host_cost: the {path} path failed (exit {r.returncode}):\n"
                       f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


TIMES = ("host_ms", "back_to_back_ms")


def over_seeds(runs):
    """One path's figures from its interpreters (one per hash seed): each time the median over
    them, the counts those of the first (the same steps: every interpreter counts the same)."""
    merged = dict(runs[0])
    for name in TIMES:
        if all(name in run for run in runs):
            merged[name] = statistics.median(run[name] for run in runs)
    if all("phases_ms" in run for run in runs):
        merged["phases_ms"] = {phase: statistics.median(run["phases_ms"][phase] for run in runs) for phase in PHASES}
    if all("map_layers_us" in run for run in runs):
        merged["map_layers_us"] = [(layer[0][0], statistics.median(us for _, us in layer))
                                   for layer in zip(*(run["map_layers_us"] for run in runs))]
    merged["seeds"] = len(runs)
    return merged


def _per_path_table(results, field, title, columns, cells):
    """A blank line, ``title`` and a table with a row per path of ``cells(results[path][field])``
    under ``columns``; nothing unless every path has ``field``."""
    if not all(field in r for r in results.values()):
        return []
    lines = ["", title, "| path | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for path in PATHS:
        if path in results:
            lines.append(f"| {path} | " + " | ".join(cells(results[path][field])) + " |")
    return lines


def report(results, repeats):
    base = results.get("cpu")
    seeds = next(iter(results.values())).get("seeds", 1)
    over = f", then over {seeds} interpreters (PYTHONHASHSEED=0..{seeds - 1})" if seeds > 1 else ""
    lines = [f"scene: {next(iter(results.values()))['voxels']} voxels of a generated KITTI scene, VoxelBackBone8x "
             f"training step, one thread, fresh maps every step, median of {repeats}{over}",
             "| path | host ms / step | x CPU step | Triton launches | emulator launches | torch operators | host reads |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    names = {"cpu": "C++ CPU backend (whole step, real compute)", "cuda": "CUDA path (device work removed)",
             "npu": "NPU path (device work removed)"}
    for path in PATHS:
        if path not in results:
            continue
        r = results[path]
        ratio = f"{r['host_ms'] / base['host_ms']:.2f}" if base else "-"
        lines.append(f"| {names[path]} | {r['host_ms']:.2f} | {ratio} | {r['triton_launches']} | "
                     f"{r['emulator_launches']} | {r['torch_ops']} | {r['host_reads']} |")
    lines += _per_path_table(
        results, "back_to_back_ms", "back to back (the steady state of a training loop: the same steps one after "
        "another, no collection among them, each starting with the caches the previous one left; medians)",
        ("host ms / step", "x CPU step"),
        lambda ms: (f"{ms:.2f}", f"{ms / base['back_to_back_ms']:.2f}" if base else "-"))
    lines += _per_path_table(
        results, "phases_ms", "where it goes (ms per step, medians of as many more steps, timed per phase): map "
        "lookups and builds, loss.backward(), the rest (forward gathers and BatchNorms, loss, zero_grad)",
        PHASES, lambda phases: (f"{phases[phase]:.2f}" for phase in PHASES))
    if all("map_layers_us" in results[path] for path in results):
        shown = [path for path in PATHS if path in results]
        lines += ["", "map lookups and builds per layer (us, medians, in call order; reuse by indice_key included)",
                  "| layer | " + " | ".join(shown) + " |", "| --- |" + " --- |" * len(shown)]
        for i, (layer, _) in enumerate(results[shown[0]]["map_layers_us"]):
            lines.append(f"| {layer} | " + " | ".join(f"{results[p]['map_layers_us'][i][1]:.0f}" for p in shown) + " |")
    if base:
        lines.append("ratios: " + " ".join(f"{p}={results[p]['host_ms'] / base['host_ms']:.2f}"
                                          for p in PATHS if p in results and p != "cpu"))
    return "\n".join(lines)


def _paths(text):
    paths = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in paths if p not in PATHS]
    if bad or not paths:
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(PATHS)}, got {text!r}")
    return paths


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voxels", type=_positive, default=400, help="voxels of the KITTI crop (default 400)")
    ap.add_argument("--repeats", type=_positive, default=7, help="timed steps, the median is reported (default 7)")
    ap.add_argument("--seeds", type=_positive, default=3,
                    help="interpreters per path, hash seeds 0..N-1; each time is the median over them (default 3)")
    ap.add_argument("--paths", type=_paths, default=list(PATHS), help="comma-separated subset of cpu,cuda,npu")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.child:
        print(MARK + json.dumps(measure(args.child, args.voxels, args.repeats)))
        return
    results = {p: over_seeds([run_path(p, args.voxels, args.repeats, seed) for seed in range(args.seeds)])
               for p in args.paths}
    print(report(results, args.repeats))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
