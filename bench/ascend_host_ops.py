"""Host-side work of one training step through an accelerator orchestration: the torch operators the
host issues (each one a launch on the NPU stream, ~µs of host time) and the host reads (device values
copied to the host: a stream sync each), counted by torch's profiler.

    python -m bench.ascend_host_ops [--path cuda-on-cpu|npu-on-cpu] [--json out.json]

``count_host_ops(step, pause_in, reads_in)`` is path-neutral: ``step`` runs one training step;
the step runs under torch's profiler; an aten operator counts when it is called from Python (user
code, autograd, the orchestration's op implementations), not when it is nested inside another
operator. Calls of the functions named in ``pause_in`` (the compute-kernel launches of the path)
are counted as kernel launches and the operators inside them are not counted; calls of ``reads_in``
are host reads (``tolist()`` is no operator), as is every ``aten::_local_scalar_dense``
(``.item()``) and ``aten::is_nonzero``.

The step counted is the second of a fresh process (training's steady state, as bench.host_cost
times it; gradients set to None after each step, fresh maps each step); the first step's counts,
which include the small constants made once and kept, are printed beside it.

Paths (``PATHS``), each counted in a fresh process with its switch set before mx_sparse is imported:
``npu-on-cpu`` is the NPU path itself (``MXS_NPU_ON_CPU=1``: the orchestration that ships for NPU
tensors, its five AscendC kernels launched in the CPU emulator; a launch is one C call, as one
aclnn call on the NPU, counted through ``mx_sparse.runtime.ascend.emulator_stats``); ``cuda-on-cpu`` is
the CUDA path (``MXS_CUDA_ON_CPU=1`` with ``TRITON_INTERPRET=1``: CPU tensors can run Triton
kernels only in the interpreter), the Triton launches paused.
"""
import argparse
import collections
import contextlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, Tuple

ROOT = Path(__file__).resolve().parent.parent

# path name -> (environment, functions whose calls are kernel launches, functions that read to the host)
PATHS = {
    "cuda-on-cpu": ({"MXS_CUDA_ON_CPU": "1", "TRITON_INTERPRET": "1"}, [("mx_sparse._cuda.launch", "run")],
                    [("mx_sparse._accelerator.host_sync", "read")]),
    # the AscendC kernels launched in the emulator (one ctypes call each, as one aclnn call on the NPU)
    "npu-on-cpu": ({"MXS_NPU_ON_CPU": "1"}, [("mx_sparse.runtime.ascend", "_call")],
                   [("mx_sparse._accelerator.host_sync", "read")]),
}
SWITCHES = ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU", "TRITON_INTERPRET")   # what the paths set (and nothing else may)
# ops that only create views or metadata: no kernel on the device (reported apart)
VIEW_OPS = {"view", "_unsafe_view", "reshape", "alias", "as_strided", "expand", "permute", "transpose", "t", "select",
            "slice", "narrow", "unsqueeze", "squeeze", "detach", "unbind", "split", "split_with_sizes", "flip_view",
            "_reshape_alias", "diagonal", "unfold", "view_as", "lift_fresh", "empty_like", "empty", "new_empty",
            "empty_strided", "new_empty_strided", "sym_size", "sym_stride", "is_same_size", "resolve_conj",
            "resolve_neg"}


LAUNCH_RANGE = "mxs_host_ops::kernel_launch"
# conversions that are metadata-only when they dispatch nothing below them (dtype/device already right)
NO_OP_WHEN_LEAF = {"to", "contiguous", "type_as", "_to_copy_noop"}


def count_host_ops(step: Callable[[], None], pause_in: Iterable[Tuple[str, str]] = (),
                   reads_in: Iterable[Tuple[str, str]] = ()) -> Dict[str, object]:
    """Run ``step`` once under torch's profiler and count its host-side operators (the aten operators
    called from Python -- user code, autograd, the orchestration's op implementations -- not the ones
    nested inside another aten operator), its host reads and its kernel launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    reads, launches = collections.Counter(), collections.Counter()
    patches = []

    def wrap(mod_name, attr, make):
        mod = importlib.import_module(mod_name)
        orig = getattr(mod, attr)
        setattr(mod, attr, make(orig, f"{mod_name}.{attr}"))
        patches.append((mod, attr, orig))

    def launch_wrapper(orig, key):
        def w(*a, **k):
            launches[key] += 1
            with record_function(LAUNCH_RANGE):
                return orig(*a, **k)
        return w

    def read_wrapper(orig, key):
        def w(*a, **k):
            reads[key] += 1
            return orig(*a, **k)
        return w

    try:
        for m, f in pause_in:
            wrap(m, f, launch_wrapper)
        for m, f in reads_in:
            wrap(m, f, read_wrapper)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
    finally:
        for mod, attr, orig in reversed(patches):
            setattr(mod, attr, orig)
    ops, views, entry = collections.Counter(), collections.Counter(), collections.Counter()

    events = list(prof.events())
    # operators run inside a kernel launch (its time range on the same thread) are the kernel's
    spans = [(e.thread, e.time_range.start, e.time_range.end) for e in events if e.name == LAUNCH_RANGE]

    def in_launch(ev):
        t = ev.time_range.start
        return any(th == ev.thread and a <= t <= b for th, a, b in spans)

    for ev in events:
        name = ev.name
        if name.startswith("mx_sparse::"):
            entry[name] += 1
            continue
        if not name.startswith("aten::") or in_launch(ev):
            continue
        if name in ("aten::_local_scalar_dense", "aten::is_nonzero"):
            reads[name] += 1
        if ev.cpu_parent is not None and ev.cpu_parent.name.startswith("aten::"):
            continue   # nested inside another operator: part of that operator's implementation
        # a conversion that returned its input (no _to_copy / clone below it) issues no device work
        no_op = name[6:] in NO_OP_WHEN_LEAF and not any(c.name.startswith("aten::") for c in ev.cpu_children)
        (views if name[6:] in VIEW_OPS or no_op else ops)[name] += 1
    return {"torch_ops": sum(ops.values()), "view_ops": sum(views.values()),
            "host_reads": sum(reads.values()), "kernel_launches": sum(launches.values()),
            "orchestration_calls": sum(entry.values()),
            "by_op": dict(ops.most_common()), "reads": dict(reads), "launches": dict(launches),
            "entries": dict(entry.most_common())}


def backbone_step(voxels: int = 600, seed: int = 0) -> Callable[[], None]:
    """One training step (forward + backward, then the gradients set to None as
    ``optimizer.zero_grad()`` does) of VoxelBackBone8x on a small generated scene, with fresh maps
    each step; the host work per step depends on the layers, not on the voxel count, so a small
    scene counts it."""
    import torch

    import mx_sparse
    from mx_sparse.models.backbones import VoxelBackBone8x
    g = torch.Generator().manual_seed(seed)
    shape = [41, 96, 96]
    cells = shape[0] * shape[1] * shape[2]
    keys = torch.randperm(cells, generator=g)[:voxels].sort().values
    ind = torch.stack([torch.zeros_like(keys), keys // (shape[1] * shape[2]), (keys // shape[2]) % shape[1],
                       keys % shape[2]], 1).int()
    net = VoxelBackBone8x(4)
    feats = torch.randn(voxels, 4, generator=g)

    def step():
        x = mx_sparse.SparseConvTensor(feats, ind, shape, 1)
        out = net(x)
        out = out[-1] if isinstance(out, (list, tuple)) else out
        f = out.features if hasattr(out, "features") else out
        f.float().sum().backward()
        net.zero_grad(set_to_none=True)
    return step


def count_path(path: str, voxels: int = 600) -> Dict[str, object]:
    """Count in a fresh interpreter with the path's switches set before mx_sparse is imported."""
    env_extra, _, _ = PATHS[path]
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench import ascend_host_ops as h; "
            f"print('MXS-HOST-OPS ' + json.dumps(h._count_here({path!r}, {voxels})))")
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}   # only this path's switch is set
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**env, **env_extra}, timeout=3600)
    for line in r.stdout.splitlines():
        if line.startswith("MXS-HOST-OPS "):
            return json.loads(line[len("MXS-HOST-OPS "):])
    raise RuntimeError(f"counting the host ops of {path} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def _emulator_launches(path: str) -> int:
    if path == "npu-on-cpu":
        with contextlib.suppress(ImportError, AttributeError):
            from mx_sparse.runtime import ascend
            return sum(ascend.emulator_stats().values())
    return 0


def _count_here(path: str, voxels: int) -> Dict[str, object]:
    """The second step of a fresh process (the steady state of training, as bench.host_cost times
    it): the first also makes what is made once and kept (the map builders' and the BatchNorm's
    small constants, which depend on the grid and the layers, not on the step), reported apart."""
    _, pause_in, reads_in = PATHS[path]
    step = backbone_step(voxels)
    first = count_host_ops(step, pause_in, reads_in)
    before = _emulator_launches(path)
    res = count_host_ops(step, pause_in, reads_in)
    if path == "npu-on-cpu":
        res["kernel_launches"] = _emulator_launches(path) - before
    res["first_step"] = {k: first[k] for k in ("torch_ops", "view_ops", "host_reads")}
    res["path"] = path
    res["voxels"] = voxels
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", choices=sorted(PATHS), default="npu-on-cpu")
    ap.add_argument("--voxels", type=int, default=600)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    res = count_path(a.path, a.voxels)
    print(f"{a.path}: {res['torch_ops']} torch operators (+{res['view_ops']} view/metadata ops), "
          f"{res['host_reads']} host reads, {res['kernel_launches']} kernel launches per VoxelBackBone8x training "
          f"step (the second step of a fresh process; the first: {res['first_step']['torch_ops']} torch operators, "
          f"{res['first_step']['host_reads']} host reads, with the constants it makes once)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
