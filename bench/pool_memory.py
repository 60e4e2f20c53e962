"""Peak resident memory of sparse max pooling, mx_sparse's spconv surface against spconv 2.3.8,
each in a fresh subprocess: ``SparseMaxPool3d(3, 2, 1)`` forward on generated KITTI scenes cut to
``--voxels`` voxels with ``--channels`` float32 channels, without autograd. Reported: the output
size and the extra peak RSS of the pooling call over the baseline just before it (the input
already built; the high-water mark reset as in bench/memory.py). The neighbor map the layer builds
counts in the extra memory (spconv builds its own indice pairs too).

    python -m bench.pool_memory [--voxels 200000] [--channels 64]

(issue 28: before the pooling ops, mx_sparse's layer gathered an [M, K, C] window tensor: +8.6 GiB
on 200k voxels x 64 channels)."""
import argparse
import gc
import json
import os
import subprocess
import sys

from .memory import _reset_hwm, _status_kb, _trim_heap


def scene(voxels: int, channels: int):
    import torch
    from mx_sparse.synthetic import make_batch
    batch = 1
    while True:
        b = make_batch("kitti", batch_size=batch, seed=0)
        if b["indices"].shape[0] >= voxels or batch >= 16:
            break
        batch *= 2
    idx = b["indices"][:voxels].contiguous()
    g = torch.Generator().manual_seed(0)
    return torch.randn(idx.shape[0], channels, generator=g), idx, b["spatial_shape"], batch


def measure_in_child(lib: str, voxels: int, channels: int) -> dict:
    import torch
    torch.set_num_threads(1)   # spconv's CPU scatter races with more threads (tests/compat/conftest.py)
    if lib == "spconv":
        import spconv.pytorch as sp
    else:
        from mx_sparse.compat.spconv2 import pytorch as sp
    f, idx, shape, batch = scene(voxels, channels)
    layer = sp.SparseMaxPool3d(3, 2, 1)
    with torch.no_grad():
        layer(sp.SparseConvTensor(f[:1000], idx[:1000], shape, batch))   # warm-up: lazy init
        x = sp.SparseConvTensor(f, idx, shape, batch)
        gc.collect()
        _trim_heap()
        resettable = _reset_hwm()
        base = _status_kb("VmRSS")
        y = layer(x)
        extra = (_status_kb("VmHWM") - base) / 1024
    out_mb = y.features.numel() * y.features.element_size() / 2 ** 20
    return dict(lib=lib, voxels=idx.shape[0], channels=channels, out_rows=y.features.shape[0], out_mb=out_mb,
                extra_mb=extra, ratio=extra / out_mb, hwm_reset=resettable)


def measure(lib: str, voxels: int, channels: int, timeout: float = 900) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "bench.pool_memory", "--child", lib, "--voxels", str(voxels), "--channels",
           str(channels)]
    try:
        p = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(lib=lib, error=f"timeout after {timeout}s")
    if p.returncode != 0:
        return dict(lib=lib, error=p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voxels", type=int, default=200000)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--child", choices=["mx_sparse", "spconv"])
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure_in_child(args.child, args.voxels, args.channels)))
        return
    print("| library | voxels | channels | output rows | output MiB | extra peak RSS MiB | extra / output |")
    print("|---|---|---|---|---|---|---|")
    for lib in ("mx_sparse", "spconv"):
        r = measure(lib, args.voxels, args.channels)
        if "error" in r:
            print(f"| {lib} | error: {r['error']} |")
            continue
        print(f"| {lib} | {r['voxels']} | {r['channels']} | {r['out_rows']} | {r['out_mb']:.1f} | "
              f"{r['extra_mb']:.1f} | {r['ratio']:.2f} |")


if __name__ == "__main__":
    main()
