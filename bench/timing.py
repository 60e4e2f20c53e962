"""Timed runs. Every library configuration is a ``Variant`` (library, thread count, patch);
``alternate`` runs the variants of one measurement in turn (A B C A B C ...), after a
warm-up round, in this one process, and reports median and min per variant."""
import copy
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List

import torch

import mx_sparse
from mx_sparse import functional as F

from . import spconv_nets


@dataclass
class Variant:
    name: str           # "mx_sparse", "spconv-1t", "spconv-2t", "spconv-2t-fix"
    lib: str            # "mx" or "spconv"
    threads: int
    scatter_fix: bool = False

    def activate(self):
        torch.set_num_threads(self.threads)
        if self.lib == "spconv":
            spconv_nets.scatter_fix(self.scatter_fix)


def variants(threads: int, spconv: bool = True, device="cpu") -> List[Variant]:
    """mx_sparse, and (``spconv=True``) spconv at 1 thread, and on the CPU also at ``threads``
    threads as shipped and with the scatter fix (a CPU-only race)."""
    out = [Variant("mx_sparse", "mx", threads)]
    if spconv:
        out.append(Variant("spconv-1t", "spconv", 1))
    if spconv and threads > 1 and torch.device(device).type == "cpu":
        out += [Variant(f"spconv-{threads}t", "spconv", threads),
                Variant(f"spconv-{threads}t-fix", "spconv", threads, scatter_fix=True)]
    return out


def synchronize(device) -> None:
    """Waits for queued device work (no-op on CPU), so that wall-clock times are complete."""
    if torch.device(device).type != "cpu":
        torch.accelerator.synchronize(device)


def make_tensor(lib, inp, dtype=torch.float32, requires_grad=False):
    f = inp["features"].to(dtype).clone().requires_grad_(requires_grad)
    if lib == "mx":
        return mx_sparse.SparseConvTensor(f, inp["indices"], inp["spatial_shape"], inp["batch_size"])
    return spconv_nets.make_input(f, inp["indices"], inp["spatial_shape"], inp["batch_size"])


def run_forward(net, lib, inp, dtype=torch.float32):
    """Inference: eval mode, no autograd; includes building the neighbor maps, as every
    new point cloud must."""
    net.eval()
    x = make_tensor(lib, inp, dtype)
    dev = inp["features"].device
    synchronize(dev)
    t0 = time.perf_counter()
    with torch.no_grad():
        net(x)
    synchronize(dev)
    return time.perf_counter() - t0


def run_train(net, lib, inp, dtype=torch.float32):
    """Training step without the optimizer: forward in train mode, scalar loss, backward
    into every weight (input features do not require grad, as in a real detector)."""
    net.train()
    net.zero_grad(set_to_none=True)
    x = make_tensor(lib, inp, dtype)
    dev = inp["features"].device
    synchronize(dev)
    t0 = time.perf_counter()
    y = net(x)
    y.features.float().square().mean().backward()
    synchronize(dev)
    return time.perf_counter() - t0


def summarize(times: List[float]) -> Dict:
    return dict(median=statistics.median(times), min=min(times), n=len(times), runs=[round(t, 5) for t in times])


def alternate(jobs: Dict[str, Callable[[], float]], activate: Dict[str, Callable[[], None]], repeats: int,
              budget_s: float, warmup: int = 1, min_repeats: int = 3) -> Dict[str, Dict]:
    """Runs ``jobs`` in turn, ``warmup`` rounds untimed, then up to ``repeats`` timed rounds
    (fewer, but at least ``min_repeats``, once ``budget_s`` seconds are spent)."""
    times = {k: [] for k in jobs}
    start = time.perf_counter()
    for r in range(warmup + repeats):
        if r >= warmup + min_repeats and time.perf_counter() - start > budget_s:
            break
        for name, job in jobs.items():
            activate[name]()
            t = job()
            if r >= warmup:
                times[name].append(t)
    return {k: summarize(v) for k, v in times.items()}


def time_networks(nets: Dict[str, torch.nn.Module], vs: List[Variant], inp, mode: str, repeats: int,
                  budget_s: float, dtype=torch.float32) -> Dict[str, Dict]:
    run = run_forward if mode == "forward" else run_train
    jobs = {v.name: (lambda v=v: run(nets[v.lib], v.lib, inp, dtype)) for v in vs}
    return alternate(jobs, {v.name: v.activate for v in vs}, repeats, budget_s)


def time_train_float64(nets: Dict[str, torch.nn.Module], vs: List[Variant], inp, repeats: int,
                       budget_s: float) -> Dict[str, Dict]:
    """The training step in float64 (what gradchecks and models' unit tests run in): copies of
    both networks in double, the same alternating runs as float32."""
    nets64 = {lib: copy.deepcopy(net).double() for lib, net in nets.items()}
    return time_networks(nets64, vs, inp, "train", repeats, budget_s, dtype=torch.float64)


# ---------------------------------------------------------------------------------------
# Neighbor-map building
# ---------------------------------------------------------------------------------------
def transpose_of_nonsymmetric(data):
    return data.nbr if data.symmetric else data.nbr_t


def mx_map_build_calls(out_tensor) -> List[Callable]:
    """Closures rebuilding every map cached in an mx_sparse output tensor (map and what
    training needs for the input gradient), through the same functions the layers call."""
    from mx_sparse.nn.indice_data import build_conv_data, build_subm_data
    calls = []
    for d in out_tensor.indice_dict.values():
        b = out_tensor.batch_size
        # transpose_of_nonsymmetric also builds the transpose where training needs one (strided
        # maps, inside backward; odd submanifold maps need none): spconv's rulebook holds both
        # directions
        if d.kind == "subm":
            def call(d=d):
                return transpose_of_nonsymmetric(
                    build_subm_data(d.in_indices, d.in_spatial_shape, b, d.kernel_size, d.dilation))
        else:
            def call(d=d):
                return transpose_of_nonsymmetric(build_conv_data(d.in_indices, d.in_spatial_shape, b, d.kernel_size,
                                                                 d.stride, d.padding, d.dilation))
        calls.append(call)
    return calls


def time_map_building(nets, vs: List[Variant], inp, repeats, budget_s) -> Dict[str, Dict]:
    """Builds every neighbor map of one forward pass (one per indice_key), nothing else.
    mx_sparse: build_subm_map / build_conv_map + transpose_map; spconv:
    ``spconv.pytorch.ops.get_indice_pairs`` (its Native-algorithm rulebook, which holds
    both directions). The calls are collected from one real forward of each network."""
    calls = {}
    for v in vs:
        if v.lib in calls:
            continue
        v.activate()
        net = nets[v.lib]
        net.eval()
        with torch.no_grad():
            out = net(make_tensor(v.lib, inp))
        calls[v.lib] = mx_map_build_calls(out) if v.lib == "mx" else spconv_nets.map_build_calls(out)
    map_vs = [v for v in vs if not v.scatter_fix]   # the patch does not touch map building
    mx = next((v for v in map_vs if v.lib == "mx"), None)
    if mx is not None and mx.threads > 1:   # the map ops on one thread too, beside spconv-1t
        map_vs.insert(1, Variant(f"{mx.name}-1t", "mx", 1))

    dev = inp["features"].device

    def job(lib):
        def run():
            synchronize(dev)
            t0 = time.perf_counter()
            for c in calls[lib]:
                c()
            synchronize(dev)
            return time.perf_counter() - t0
        return run

    res = alternate({v.name: job(v.lib) for v in map_vs}, {v.name: v.activate for v in map_vs}, repeats, budget_s)
    for v in map_vs:
        res[v.name]["maps"] = len(calls[v.lib])
    return res


# ---------------------------------------------------------------------------------------
# FLOPs, the torch.mm ceiling, bf16 and per-call overhead
# ---------------------------------------------------------------------------------------
def conv_layers(net, inp) -> List[Dict]:
    """Per convolution layer of one forward: channels, kernel volume, number of
    (input, output, offset) pairs (entries != -1 of its neighbor map) and FLOPs
    2 * pairs * Cin * Cout / groups."""
    layers, hooks = [], []

    def hook(module, args, out):
        d = out.indice_dict[module.indice_key]
        pairs = int((d.nbr != -1).sum())
        cin, cout, g = module.in_channels, module.out_channels, module.groups
        layers.append(dict(name=module._bench_name, kind="inverse" if module.inverse else
                           "subm" if module.subm else "conv", cin=cin, cout=cout, kvol=module.kernel_volume,
                           rows_out=int(out.features.shape[0]), pairs=pairs, flops=2 * pairs * cin * cout // g))

    for name, m in net.named_modules():
        if isinstance(m, mx_sparse.SparseConvolution):
            m._bench_name = name
            hooks.append(m.register_forward_hook(hook))
    try:
        net.eval()
        with torch.no_grad():
            net(make_tensor("mx", inp))
    finally:
        for h in hooks:
            h.remove()
    return layers


def _fastest_mm(a, b, out, threads, min_calls, min_seconds, device) -> float:
    torch.set_num_threads(threads)
    for _ in range(2):
        torch.mm(a, b, out=out)
    ts, start = [], time.perf_counter()
    while len(ts) < min_calls or (time.perf_counter() - start < min_seconds and len(ts) < 2000):
        synchronize(device)
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        synchronize(device)
        ts.append(time.perf_counter() - t0)
    return min(ts)


def mm_ceiling(layers: List[Dict], threads: int, min_calls: int = 25, min_seconds: float = 0.05,
               device="cpu") -> Dict:
    """GFLOP/s of plain dense ``torch.mm`` doing the same work: for every layer, ``kvol``
    GEMMs ``[pairs/kvol, Cin] @ [Cin, Cout]`` (its average per-offset shape). Each shape is
    timed at ``threads`` threads and at 1 thread, at least ``min_calls`` times and
    ``min_seconds`` long each, and its fastest call kept: a ceiling is the best the machine
    did (on a busy machine a multi-threaded GEMM can stall on a descheduled thread)."""
    cache, total_t, total_f = {}, 0.0, 0
    for L in layers:
        m = max(1, round(L["pairs"] / L["kvol"]))
        key = (m, L["cin"], L["cout"])
        if key not in cache:
            a = torch.randn(m, L["cin"], device=device)
            b = torch.randn(L["cin"], L["cout"], device=device)
            out = torch.empty(m, L["cout"], device=device)
            cache[key] = min(_fastest_mm(a, b, out, t, min_calls, min_seconds, device) for t in {threads, 1})
        total_t += cache[key] * L["kvol"]
        total_f += 2 * m * L["cin"] * L["cout"] * L["kvol"]
    torch.set_num_threads(threads)
    return dict(gflops=total_f / total_t / 1e9, seconds=total_t, flops=total_f)


def bf16_vs_fp32(net_mx, inp, repeats, budget_s, threads) -> Dict:
    """mx_sparse in bfloat16 (features and all parameters cast) against fp32: forward+backward
    time ratio (alternating runs) and accuracy of the bf16 forward output relative to fp32."""
    net16 = copy.deepcopy(net_mx).to(torch.bfloat16)
    act = lambda: torch.set_num_threads(threads)  # noqa: E731
    res = alternate({"fp32": lambda: run_train(net_mx, "mx", inp),
                     "bf16": lambda: run_train(net16, "mx", inp, torch.bfloat16)},
                    {"fp32": act, "bf16": act}, repeats, budget_s)
    net_mx.eval()
    net16.eval()
    with torch.no_grad():
        ref = net_mx(make_tensor("mx", inp)).features
        out = net16(make_tensor("mx", inp, torch.bfloat16)).features.float()
    err = (out - ref).abs()
    scale = ref.abs().max().item()
    res["max_rel_err"] = err.max().item() / scale
    res["mean_rel_err"] = err.mean().item() / ref.abs().mean().item()
    res["speedup"] = res["fp32"]["median"] / res["bf16"]["median"]
    return res


def per_call_overhead(vs: List[Variant], inp, calls: int = 200) -> Dict[str, Dict]:
    """One SubMConv3d 4->16 k3 (no bias) on a ~10-voxel tensor: time per call (new tensor, map build,
    gather-mm) for forward and forward+backward, alternating the variants in blocks."""
    torch.manual_seed(0)
    mx_conv = mx_sparse.SubMConv3d(4, 16, 3, padding=1, bias=False, indice_key="tiny").to(inp["features"].device)
    nets = {"mx": mx_conv}
    if any(v.lib == "spconv" for v in vs):
        sp_conv = spconv_nets.sp.SubMConv3d(4, 16, 3, padding=1, bias=False, indice_key="tiny")
        spconv_nets.copy_weights(mx_conv, sp_conv)
        nets["spconv"] = sp_conv
    vs = [v for v in vs if not v.scatter_fix]
    out = {}
    for mode, run in (("forward", run_forward), ("train", run_train)):
        def block(v, run=run):
            def go():
                t0 = time.perf_counter()
                for _ in range(calls):
                    run(nets[v.lib], v.lib, inp)
                return (time.perf_counter() - t0) / calls
            return go
        res = alternate({v.name: block(v) for v in vs}, {v.name: v.activate for v in vs}, 5, 60.0)
        for name, r in res.items():
            out.setdefault(name, {})[mode] = r
    return out
