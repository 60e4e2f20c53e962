"""Training-step time of a SECOND-style stack (SubMConv3d / SparseConv3d) on the NPU with mx_sparse and,
when installed, with mx_driving's SparseConv3d / SubMConv3d: the same layers, indices and features.
Prints one line per library (median of --reps steps after --warmup). Needs an NPU."""
import argparse
import statistics
import time

import torch


def scene(n, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    cells = shape[0] * shape[1] * shape[2]
    keys = torch.randperm(cells, generator=g)[:n].sort().values
    return torch.stack([torch.zeros_like(keys), keys // (shape[1] * shape[2]), (keys // shape[2]) % shape[1],
                        keys % shape[2]], 1).int()


def stack(lib):
    return lib.SparseSequential(lib.SubMConv3d(16, 16, 3, indice_key="s1"), lib.SubMConv3d(16, 16, 3, indice_key="s1"),
                                lib.SparseConv3d(16, 32, 3, stride=2, padding=1), lib.SubMConv3d(32, 32, 3, indice_key="s2"))


def time_steps(lib, ind, shape, reps, warmup, dtype):
    net = stack(lib).npu().to(dtype)
    feats = torch.randn(ind.shape[0], 16, dtype=dtype).npu()
    ind = ind.npu()
    times = []
    for i in range(warmup + reps):
        torch.npu.synchronize()
        t0 = time.perf_counter()
        x = lib.SparseConvTensor(feats.requires_grad_(), ind, shape, 1)
        net(x).features.float().square().sum().backward()
        torch.npu.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--voxels", type=int, default=60000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    a = ap.parse_args()
    import torch_npu  # noqa: F401
    import mx_sparse
    shape = [41, 1440, 1440]
    ind = scene(a.voxels, shape)
    dt = getattr(torch, a.dtype)
    print(f"BENCH mx_sparse   {a.voxels} voxels {a.dtype}: {time_steps(mx_sparse, ind, shape, a.reps, a.warmup, dt) * 1e3:.2f} ms/step")
    try:
        import mx_driving
    except ImportError:
        print("BENCH mx_driving  not installed")
        return
    try:
        print(f"BENCH mx_driving  {a.voxels} voxels {a.dtype}: "
              f"{time_steps(mx_driving, ind, shape, a.reps, a.warmup, dt) * 1e3:.2f} ms/step")
    except Exception as e:  # noqa: BLE001 - report, do not hide, a failure of the other library
        print(f"BENCH mx_driving  failed: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
