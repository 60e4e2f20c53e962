"""Host cost of the fused BatchNorm+ReLU of one VoxelBackBone8x training step: the NPU's torch
operators against the C++ CPU kernels, same calls, same process. The NPU's operators as the NPU path
runs them (MXS_NPU_ON_CPU=1 too): the common case in C++ with its argument checks
(kernels/orchestration/batch_norm_operators.cpp, here called through mx_sparse._C instead of the
dispatcher). Until round 4's fifth session they ran as Python (mx_sparse/_accelerator/
batch_norm_operators.py after the orchestration's checks): 607-615 us a step against 406-412 us in
C++ on the same machine (the same operators and bits; CHANGELOG).

    python -m bench.batch_norm_host [--repeats 5] [--steps 100]

The calls are those of bench.host_cost's step (400 voxels of a generated KITTI scene): the feature
shapes of its fused layers, recorded from one forward on the C++ backend, each as forward, recompute
(scale_shift_relu) and backward, on seeded data. One thread; the step thread's CPU time; the minimum
over ``--repeats`` loops of ``--steps`` steps (a loaded machine only ever adds time). Prints one line
per implementation (microseconds per step) and the ratio of the NPU path's to the CPU kernels'.
"""
import argparse
import time

import torch


def step_shapes():
    """[(N, C)] of the fused BatchNorm+ReLU calls in bench.host_cost's forward, in call order."""
    from torch.utils._python_dispatch import TorchDispatchMode

    import mx_sparse
    from bench import host_cost
    from mx_sparse.models import VoxelBackBone8x

    shapes = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.name() == "mx_sparse::batch_norm_relu_forward":
                shapes.append(tuple(args[0].shape))
            return func(*args, **(kwargs or {}))

    data = host_cost.scene(400)
    torch.manual_seed(0)
    net = VoxelBackBone8x(data["features"].shape[1]).train()
    with Record():
        net(mx_sparse.SparseConvTensor(data["features"], data["indices"].clone(), data["spatial_shape"], 1))
    return shapes


def _cases(shapes):
    g = torch.Generator().manual_seed(0)
    cases = []
    for n, c in shapes:
        cases.append(dict(x=torch.randn(n, c, generator=g), weight=torch.rand(c, generator=g) + 0.5,
                          bias=torch.randn(c, generator=g) * 0.1, running_mean=torch.zeros(c),
                          running_var=torch.ones(c), grad=torch.randn(n, c, generator=g)))
    return cases


def _implementations():
    """{name: (forward, scale_shift_relu, backward)}: the NPU path's C++ kernels (checks included)
    and the C++ CPU kernels' ops."""
    from mx_sparse import _C

    native = _C.batch_norm_operators
    ops = torch.ops.mx_sparse
    return {"torch operators, C++ (NPU path)": (native.forward, native.scale_shift_relu, native.backward),
            "C++ CPU kernels": (ops.batch_norm_relu_forward, ops.scale_shift_relu, ops.batch_norm_relu_backward)}


def time_step(fns, cases, repeats, steps):
    forward, recompute, backward = fns

    def step():
        for t in cases:
            y, mean, invstd, scale, shift = forward(t["x"], t["weight"], t["bias"], t["running_mean"],
                                                    t["running_var"], True, 0.1, 1e-3)
            recompute(t["x"], scale, shift)
            backward(t["grad"], t["x"], mean, invstd, t["weight"], scale, shift, True)

    for _ in range(5):
        step()
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(steps):
            step()
        best = min(best, (time.thread_time() - start) / steps)
    return 1e6 * best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    shapes = step_shapes()
    cases = _cases(shapes)
    times = {name: time_step(fns, cases, args.repeats, args.steps) for name, fns in _implementations().items()}
    print(f"{len(shapes)} fused BatchNorm+ReLU layers of bench.host_cost's step (forward, recompute, backward), "
          f"host us per step, min of {args.repeats} x {args.steps} steps:")
    for name, us in times.items():
        print(f"  {name}: {us:.0f} us")
    npu, cpu = times.values()
    print(f"ratio to the CPU kernels: {npu / cpu:.2f}")


if __name__ == "__main__":
    main()
