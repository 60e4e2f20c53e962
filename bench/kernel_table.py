"""The kernel table of a profiled step (bench/gpu_profile.py's ``kernels`` part): GPU kernels by
name with their count and total microseconds, each in a category, and the step's GPU busy
time, device-to-host copies and host synchronisations. Pure functions over
(name, start µs, end µs) intervals, so they are tested without a GPU.
"""
import collections
from typing import Dict, Iterable, List, Tuple

CATEGORIES = ("GEMM", "BatchNorm", "maps+sort", "copies", "other")

# Substrings of kernel names, checked in this order (the first match decides): mx_sparse's own
# Triton kernels by name (gather_kernels.py, batch_norm_kernels.py, map_kernels.py,
# plan_kernels.py: tests/test_gpu_profile.py checks every kernel they define is named here), then
# torch's and CUB's kernels by what their names say.
_RULES = (
    ("GEMM", ("gather_mm_kernel", "filter_splits_kernel", "gemm", "sgemm", "hgemm",
              "cutlass", "xmma", "implicit_gemm", "conv_fwd", "conv_bwd", "wgrad", "dgrad")),
    ("BatchNorm", ("moments_kernel", "normalize_relu_kernel", "scale_shift_relu_kernel", "backward_sums_kernel",
                   "backward_dx_kernel", "batch_norm", "batchnorm", "welford", "bn_")),
    ("maps+sort", ("conv_out_keys_kernel", "sorted_key_lookup_kernel", "unique_runs_kernel",
                   "row_mask_kernel", "tile_plan_kernel", "tile_lists_kernel", "sort",
                   "radix", "scan", "unique", "hash", "cub::", "indice", "pair")),
    ("copies", ("memcpy", "memset", "copy", "fill", "cat", "index_select", "gather", "scatter")),
)


def category(name: str) -> str:
    lower = name.lower()
    for cat, keys in _RULES:
        if any(k in lower for k in keys):
            return cat
    return "other"


def busy_us(intervals: Iterable[Tuple[float, float]]) -> float:
    """Microseconds in which at least one kernel ran (the union of the intervals)."""
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def table(kernels: List[Tuple[str, float, float]]) -> Dict:
    """From (kernel name, start µs, end µs): per name count and total µs (largest first), per
    category total µs, the sum of kernel times and the busy (union) time."""
    per_name = collections.defaultdict(lambda: [0, 0.0])
    for name, s, e in kernels:
        per_name[name][0] += 1
        per_name[name][1] += e - s
    rows = [{"kernel": n, "category": category(n), "count": c, "total_us": round(t, 2)}
            for n, (c, t) in sorted(per_name.items(), key=lambda kv: -kv[1][1])]
    per_category = {cat: 0.0 for cat in CATEGORIES}
    for r in rows:
        per_category[r["category"]] += r["total_us"]
    return {"kernels": rows, "categories_us": {k: round(v, 2) for k, v in per_category.items()},
            "kernel_sum_us": round(sum(r["total_us"] for r in rows), 2),
            "gpu_busy_us": round(busy_us((s, e) for _, s, e in kernels), 2),
            "launches": len(kernels)}


def host_waits(names: Iterable[str]) -> Dict[str, int]:
    """Device-to-host copies and synchronisations among a profile's event names (the CUDA
    runtime calls and copy activities the profiler records)."""
    counts = {"device_to_host_copies": 0, "synchronizations": 0}
    for n in names:
        if "DtoH" in n or "Device -> Pageable" in n or "Device -> Pinned" in n:
            counts["device_to_host_copies"] += 1
        elif "Synchronize" in n:
            counts["synchronizations"] += 1
    return counts
