"""Python bytecodes one training step executes, per source area, on the three code paths.

    python -m bench.host_bytecodes [--voxels 400] [--paths cpu,cuda,npu]

The step and the paths are bench.host_cost's (same scene, same VoxelBackBone8x step, the device work
of the accelerator paths removed the same way), counted once after two warm-up steps with
``sys.settrace``'s opcode events. A count, not a time: it does not move with the machine's load, so
on a shared machine it shows a change to the Python layers that bench.host_cost's milliseconds
cannot resolve; it leaves out everything in C++ (torch operators, the dispatcher, autograd's engine).
Areas: mx_sparse/nn, mx_sparse/functional, mx_sparse/_core, mx_sparse/_accelerator, mx_sparse/_cuda,
the rest of mx_sparse, torch, everything else (the standard library, triton, the bench itself).
"""
import argparse
import collections
import json
import os
import subprocess
import sys

from bench.host_cost import PATHS, ROOT, SWITCHES, _paths, _positive

MARK = "MXS-HOST-BYTECODES "
AREAS = ("mx_sparse/nn", "mx_sparse/functional", "mx_sparse/_core", "mx_sparse/_accelerator", "mx_sparse/_cuda",
         "mx_sparse (other)", "torch", "other")


def area(filename: str) -> str:
    if "mx_sparse/" in filename:
        inner = filename.rsplit("mx_sparse/", 1)[1]
        top = "mx_sparse/" + inner.split("/", 1)[0]
        return top if top in AREAS else "mx_sparse (other)"
    return "torch" if "/torch/" in filename else "other"


def count(path: str, voxels: int) -> dict:
    """In this interpreter (its switches set before mx_sparse was imported): bytecodes per area."""
    import torch
    from bench import host_cost
    torch.set_num_threads(1)
    removed = host_cost._Removed()
    if path == "cuda":
        host_cost._remove_triton_device_work(removed)
    elif path == "npu":
        host_cost._remove_emulator_device_work(removed)
    from mx_sparse.models import VoxelBackBone8x
    data = host_cost.scene(voxels)
    torch.manual_seed(0)
    net = VoxelBackBone8x(data["features"].shape[1]).train()
    for _ in range(2):
        host_cost._one_step(net, data)
        removed.replay_from_start()
    counts = collections.Counter()

    def on_call(frame, event, arg):
        frame.f_trace_opcodes = True
        where = area(frame.f_code.co_filename)

        def on_opcode(frame, event, arg):
            if event == "opcode":
                counts[where] += 1
            return on_opcode
        return on_opcode

    sys.settrace(on_call)
    try:
        host_cost._one_step(net, data)
    finally:
        sys.settrace(None)
    return {a: counts.get(a, 0) for a in AREAS}


def run_path(path: str, voxels: int) -> dict:
    """``count`` in a fresh interpreter with the path's switches (and only those) set."""
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU", "TRITON_INTERPRET")}
    env.update(SWITCHES[path])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-m", "bench.host_bytecodes", "--child", path, "--voxels", str(voxels)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    for line in r.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"bench.host_bytecodes: the {path} path failed (exit {r.returncode}):\n"
                       f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def report(results: dict) -> str:
    lines = ["| area | " + " | ".join(results) + " |", "| --- |" + " --- |" * len(results)]
    for a in AREAS:
        lines.append(f"| {a} | " + " | ".join(str(r[a]) for r in results.values()) + " |")
    lines.append("| all | " + " | ".join(str(sum(r.values())) for r in results.values()) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voxels", type=_positive, default=400, help="voxels of the KITTI crop (default 400)")
    ap.add_argument("--paths", type=_paths, default=list(PATHS), help="comma-separated subset of cpu,cuda,npu")
    ap.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(MARK + json.dumps(count(args.child, args.voxels)))
        return
    print(f"Python bytecodes of one VoxelBackBone8x training step ({args.voxels} voxels), per area:")
    print(report({p: run_path(p, args.voxels) for p in args.paths}))


if __name__ == "__main__":
    main()
