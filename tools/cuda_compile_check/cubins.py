"""Ahead-of-time compile of every Triton kernel configuration the CUDA backend can launch, to
real GPU binaries (cubins) for sm_80 (A100) and sm_90 (H100), with each one's resources.

    python tools/cuda_compile_check/cubins.py            # table
    python tools/cuda_compile_check/cubins.py --json     # one record per (kernel, dtype, tile, arch)

A verification tool, not shipped (it needs mx_sparse importable: a source checkout or editable install).

No GPU is needed: triton compiles through PTX with the ptxas it ships. Registers and spills
come from ptxas' own report, shared memory from the compiled kernel's metadata (Triton
allocates it dynamically). ``check`` fails on any spill, on shared memory above the
architecture's per-block limit, or on more registers than a thread may have.

The configurations are tiles.GATHER_TILES / FILTER_TILES (every tile the dispatcher can pick),
each dtype with its operand and accumulator types; float32 twice, as IEEE (the default) and as
TF32 (when torch.backends.cuda.matmul.allow_tf32 is set); and the fused BatchNorm+ReLU's kernels
(batch_norm_configurations). Scalars are int32 and never
specialised (the kernels' do_not_specialize), pointers 16-byte aligned (launch.run passes no
others): the one variant of each configuration that runs.

Must run in a process without TRITON_INTERPRET (the interpreter replaces triton.language's
helpers at import); the tests start it as a subprocess.
"""
import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile

from mx_sparse._cuda import tiles

ARCHS = (80, 90)
# Per-block shared memory limits (opt-in maximum) and registers per thread, CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability": 8.0 163 KB, 9.0 227 KB.
MAX_SHARED = {80: 163 * 1024, 90: 227 * 1024}
MAX_REGISTERS = 255

POINTER = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16", "fp64": "*fp64"}
ACC = {"fp32": "fp32", "fp16": "fp32", "bf16": "fp32", "fp64": "fp64"}


def _precisions(dtype):
    return ("ieee", "tf32") if dtype == "fp32" else ("ieee",)


def configurations():
    """(kernel, dtype, precision, tile name, signature, constexprs, options) of every launch the
    dispatcher can make."""
    import triton.language as tl
    acc_type = {"fp32": tl.float32, "fp64": tl.float64}
    ints = {name: "i32" for name in ("m", "n_in", "kvol", "cin", "cout")}
    from mx_sparse._cuda import tile_lists
    for kernel, table, extra in (("gather_mm_kernel", tiles.GATHER_TILES, ("gates", "span", "k_first", "k_step")),
                                 ("filter_splits_kernel", tiles.FILTER_TILES, ("gates", "splits"))):
        for dtype, tile in table:
            ptr = POINTER[dtype]
            if kernel == "gather_mm_kernel":
                pointers = {"features": ptr, "weight": ptr, "nbr": "*i32", "order": "*i32", "counts": "*i32",
                            "offsets": "*i32", "out": ptr, "stats": "*fp64", "tile_present": "*i32", "lists": "*i32",
                            "list_counts": "*i32", "counter": "*i64"}
            else:
                pointers = {"features": ptr, "scale": POINTER[ACC[dtype]], "shift": POINTER[ACC[dtype]],
                            "grad": ptr, "nbr": "*i32", "order": "*i32", "tile_lists": "*i32",
                            "tile_counts": "*i32", "partial": POINTER[ACC[dtype]], "dw": ptr, "tickets": "*i32",
                            "counter": "*i64"}
            signature = dict(pointers)
            signature.update(ints)
            signature.update({name: "i32" for name in extra})
            for precision in _precisions(dtype):
                constexprs = {"BLOCK_M": tile.block_m, "BLOCK_N": tile.block_n, "BLOCK_K": tile.block_k,
                              "PRECISION": precision, "WIDEN": False, "ACC": acc_type[ACC[dtype]], "COUNT": False,
                              "ALIGNED": tile.aligned,
                              "CHANNELS_FIRST": tiles.channels_first(dtype, precision, tile)}
                if kernel == "gather_mm_kernel":
                    # the variant that writes the tile moments (all but the generic half tiles) and,
                    # aligned, builds the tile lists (STATS=False is it without that epilogue, LISTS=False
                    # without the list-building programs' branch), as gather_mm.py launches them
                    constexprs.update(STATS=tile.aligned or dtype in ("fp32", "fp64"), LISTS=tile.aligned,
                                      BLOCK_T=tile_lists.BLOCK_T, WEIGHT_T=False)
                if kernel == "filter_splits_kernel":
                    # the variant that adds the splits (SUM_SPLITS=False is it without that epilogue),
                    # plain and applying the activation of a fused BatchNorm+ReLU's output as it
                    # loads the features (ACTIVATION; T: its compute type, the accumulator's)
                    constexprs.update(SUM_SPLITS=True, T=acc_type[ACC[dtype]])
                for variant in _variants(kernel, constexprs):
                    signature.update({name: "constexpr" for name in variant})
                    warps = tile.num_warps
                    if kernel == "filter_splits_kernel":
                        warps = tiles.filter_warps(dtype, precision, tile, variant["ACTIVATION"])
                    options = {"num_warps": warps, "num_stages": tile.num_stages}
                    yield kernel, dtype, precision, tile.name(), dict(signature), variant, options
    yield from batch_norm_configurations()
    yield from map_configurations()


def _variants(kernel, constexprs):
    """The compiled variants of one configuration: the filter kernel plain and with ACTIVATION; the
    gather as the forward launches it and as the input gradient does (WEIGHT_T: the layer's weight
    read transposed, no moments, no tile lists; gather_mm.gather_mm_transposed)."""
    if kernel == "gather_mm_kernel":
        return [constexprs, dict(constexprs, STATS=False, LISTS=False, WEIGHT_T=True)]
    if kernel != "filter_splits_kernel":
        return [constexprs]
    return [dict(constexprs, ACTIVATION=False), dict(constexprs, ACTIVATION=True)]


# The fused BatchNorm+ReLU's kernels: compiled without multiply-add contraction (the arithmetic
# the interpreter runs in the test suite), which ``problems`` checks in their PTX.
BATCH_NORM_KERNELS = ("moments_kernel", "normalize_relu_kernel", "scale_shift_relu_kernel", "backward_sums_kernel",
                      "backward_dx_kernel")


def batch_norm_configurations():
    """The fused BatchNorm+ReLU's kernels (batch_norm_kernels.py) as batch_norm_relu.py launches
    them for the fused layer: features float32, float64, bfloat16 and float16 with per-channel
    parameters and running statistics in the features' dtype, and (autocast) float16 / bfloat16
    features with float32 ones; each tile width; the normalize and dx kernels with batch and with
    running statistics (every parameter present: the other flag combinations leave code out)."""
    import triton.language as tl
    from mx_sparse._cuda import batch_norm_relu as bn
    f64 = "*fp64"
    options = {"num_warps": bn.WARPS, "num_stages": 1, **bn.OPTIONS}
    ints = {"n": "i32", "c": "i32"}
    widths = sorted({bn.block_c(c) for c in range(1, bn.BLOCK_C_RANGE[1] + 1)})

    def config(kernel, dtype, tile, pointers, scalars, constexprs):
        signature = {**pointers, **scalars, **{name: "constexpr" for name in constexprs}}
        return kernel, dtype, "-", tile, signature, constexprs, options

    for dtype, channels in (("fp32", "fp32"), ("fp64", "fp64"), ("bf16", "bf16"), ("fp16", "fp16"),
                            ("fp16", "fp32"), ("bf16", "fp32")):
        ptr, held, param = POINTER[dtype], POINTER[ACC[dtype]], POINTER[channels]
        T = {"T": tl.float64 if dtype == "fp64" else tl.float32}
        name = dtype if channels == dtype else f"{dtype}+{channels}"
        for width in widths:
            tiles = {"TILE_R": bn.TILE_ELEMENTS // width, "BLOCK_C": width}
            if channels == dtype:   # the kernels without per-channel parameters: once per features dtype
                yield config("moments_kernel", name, f"c{width}", {"x": ptr, "partial": f64},
                             {**ints, "block_rows": "i32"}, tiles)
                yield config("scale_shift_relu_kernel", name, f"c{width}",
                             {"x": ptr, "scale": held, "shift": held, "y": ptr}, {**ints, "block_rows": "i32"},
                             {**T, **tiles})
                yield config("backward_sums_kernel", name, f"c{width}",
                             {"x": ptr, "dy": ptr, "scale": held, "shift": held, "mean": f64, "invstd": f64,
                              "partial": f64}, {**ints, "block_rows": "i32"}, {**T, **tiles})
            for batch_stats in (True, False):
                mode = f"c{width}-{'batch' if batch_stats else 'running'}"
                present = {"HAS_WEIGHT": True, "HAS_BIAS": True, "HAS_RUNNING_MEAN": True, "HAS_RUNNING_VAR": True}
                yield config("normalize_relu_kernel", name, mode,
                             {"x": ptr, "partial": f64, "y": ptr, "mean": f64, "invstd": f64, "scale": held,
                              "shift": held, "weight": param, "bias": param, "running_mean": param,
                              "running_var": param},
                             {**ints, **{s: "i32" for s in ("nblocks", "stat_rows", "block_rows", "momentum_hi", "momentum_lo",
                                                             "eps_hi", "eps_lo")}},
                             {**T, "BATCH_STATS": batch_stats, **present, **tiles, "CHUNK_B": bn.CHUNK_B})
                yield config("backward_dx_kernel", name, mode,
                             {"x": ptr, "dy": ptr, "scale": held, "shift": held, "mean": f64, "invstd": f64,
                              "weight": param, "partial": f64, "dx": ptr, "dgamma": param, "dbeta": param},
                             {**ints, "nblocks": "i32", "block_rows": "i32"},
                             {**T, "BATCH_STATS": batch_stats, "HAS_WEIGHT": True, **tiles, "CHUNK_B": bn.CHUNK_B})


# The map builders' and map plans' kernels (map_kernels.py, plan_kernels.py), as map_primitives.py
# and map_plan.py launch them. Triton's interpreter runs kernels a compiler refuses (a plain Python
# global read in a kernel: seen on an H100), so every one of them is compiled here too.
MAP_KERNELS = ("conv_out_keys_kernel", "sorted_key_lookup_kernel", "unique_runs_kernel",
               "row_mask_kernel", "tile_plan_kernel", "tile_lists_kernel")


def map_configurations():
    import torch
    from mx_sparse._cuda import map_plan, map_primitives, tile_lists
    block = {"BLOCK": map_primitives.BLOCK}
    axes = {f"{a}{d}": "i32" for a in "okspdjtvg" for d in range(map_primitives.MAX_AXES)}
    rows = map_primitives.OUT_KEY_ROWS
    for ndim in range(1, map_primitives.MAX_AXES + 1):
        for key in ("*i32", "*i64"):        # the row keys of kernel volumes up to 31, and above
            yield ("conv_out_keys_kernel", "int64", "-", f"b{rows}-{ndim}d-{key[1:]}",
                   {"indices": "*i32", "out": "*i64", "key": key, "n": "i32", "slots": "i32", "cells": "i64",
                    "bits": "i32", **axes, "NDIM": "constexpr", "BLOCK": "constexpr"}, {"NDIM": ndim, "BLOCK": rows}, {})
    for kvol in (1, 8, 27, 125):            # 1x1x1 .. 5x5x5 kernels (larger ones: 125's code, BLOCK_K 128)
        key = "*i32" if map_plan.key_dtype(kvol) == torch.int32 else "*i64"
        block_s, block_k = map_primitives.lookup_blocks(kvol)
        # positions (_sorted_key_lookup); _sorted_key_lookup_rows: rows, rows at their own rows (a
        # submanifold map), positions or rows with the transpose (a strided map)
        for rows, scatter, transpose, suffix in ((False, False, False, ""), (True, False, False, "-rows"),
                                                 (True, True, False, "-scatter"), (False, False, True, "-t"),
                                                 (True, False, True, "-rows-t")):
            yield ("sorted_key_lookup_kernel", "int64", "-", f"b{block_s}x{block_k}-k{kvol}{suffix}",
                   {"query": "*i64", "sorted_keys": "*i64", "deltas": "*i64", "out": "*i32", "key": key,
                    "order": "*i64", "tpose": "*i32", "s": "i32", "kvol": "i32", "c": "i32", "steps": "i32",
                    "bits": "i32", "BLOCK_S": "constexpr", "BLOCK_K": "constexpr", "ROWS": "constexpr",
                    "SCATTER": "constexpr", "TRANSPOSE": "constexpr"},
                   {"BLOCK_S": block_s, "BLOCK_K": block_k, "ROWS": rows, "SCATTER": scatter, "TRANSPOSE": transpose},
                   {"num_warps": map_primitives.lookup_warps(kvol, scatter)})
    # NDIM 0: _unique_sorted_keys (rows and query: the unique keys' pointer, never touched);
    # NDIM 1..4: _conv_output_rows
    output_axes = {f"{a}{d}": "i32" for a in "osq" for d in range(map_primitives.MAX_AXES)}
    for ndim in range(0, map_primitives.MAX_AXES + 1):
        yield ("unique_runs_kernel", "int64", "-", f"b{map_primitives.BLOCK}" + (f"-{ndim}d" if ndim else ""),
               {"sorted_keys": "*i64", "unique": "*i64", "count": "*i32", "scratch": "*i64",
                "rows": "*i32" if ndim else "*i64", "query": "*i64", "c": "i32", **output_axes,
                "NDIM": "constexpr", "BLOCK": "constexpr"}, {**block, "NDIM": ndim}, {})
    for kvol in (1, 8, 27, 125):            # the kernel volumes of 1x1x1, 2x2x2, 3x3x3, 5x5x5 kernels
        bits = min(kvol, map_plan.KEY_BITS)
        key = "*i32" if bits <= 31 else "*i64"
        yield ("row_mask_kernel", "int32", "-", f"m{map_plan.KEY_ROWS}-k{kvol}",
               {"nbr": "*i32", "key": key, "m": "i32", "kvol": "i32", "bits": "i32", "BLOCK_M": "constexpr",
                "BLOCK_K": "constexpr"}, {"BLOCK_M": map_plan.KEY_ROWS, "BLOCK_K": map_plan.pow2(bits)}, {})
        for block_m in sorted({t.block_m for _, t in (*tiles.GATHER_TILES, *tiles.FILTER_TILES)}):
            for in_map_order in (False, True):   # a sorted plan, a small map's (order not read: nbr stands in)
                yield ("tile_plan_kernel", "int32", "-", f"m{block_m}-k{kvol}" + ("-as-is" if in_map_order else ""),
                       {"nbr": "*i32", "order": "*i32" if in_map_order else "*i64", "order32": "*i32",
                        "counts": "*i32", "offsets": "*i32", "present": "*i32", "m": "i32", "kvol": "i32",
                        "BLOCK_M": "constexpr", "BLOCK_K": "constexpr", "IN_MAP_ORDER": "constexpr"},
                       {"BLOCK_M": block_m, "BLOCK_K": min(map_plan.pow2(kvol), map_plan.MAX_OFFSET_BLOCK),
                        "IN_MAP_ORDER": in_map_order}, {})
    for aligned in (False, True):
        yield ("tile_lists_kernel", "int32", "-", f"t{tile_lists.BLOCK_T}" + ("a" if aligned else ""),
               {"present": "*i32", "lists": "*i32", "counts": "*i32", "tiles": "i32", "kvol": "i32", "gates": "i32",
                "cin": "i32", "block_k": "i32", "span": "i32", "ALIGNED": "constexpr", "BLOCK_T": "constexpr"},
               {"ALIGNED": aligned, "BLOCK_T": tile_lists.BLOCK_T}, {"num_warps": tile_lists.WARPS})


_PTXAS = re.compile(r"Used (\d+) registers")
# PTX loads from global memory by width: scalar 16-bit loads (ld.global[.modifiers].b16 / .u16, no
# vector), and cp.async copies by their byte count (4: one element, 16: a vector)
_LD_B16 = re.compile(r"\bld\.global(?:\.[a-z0-9_:]+)*?\.(?:b16|u16|f16|bf16)\s")
_CP_ASYNC = re.compile(r"\bcp\.async\.c[ag]\.shared\.global\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(0x[0-9a-fA-F]+|\d+)")
_LD_VECTOR = re.compile(r"\bld\.global(?:\.[a-z0-9_:]+)*?\.v(\d)\.(?:b|u|f|s)(\d+)")


def load_widths(ptx: str) -> dict:
    """Counts of global loads in a kernel's PTX by width (what vectorisation reached): scalar
    16-bit loads, cp.async copies by byte count, vector loads of 8 and 16 bytes."""
    copies = [int(n, 0) for n in _CP_ASYNC.findall(ptx)]
    vectors = [int(n) * int(bits) // 8 for n, bits in _LD_VECTOR.findall(ptx)]
    return {"ld_b16_scalar": len(_LD_B16.findall(ptx)),
            "cp_async_4": copies.count(4), "cp_async_8": copies.count(8), "cp_async_16": copies.count(16),
            "ld_vector_8B": vectors.count(8), "ld_vector_16B": vectors.count(16)}


_FMA = re.compile(r"\bfma\.rn(?:\.ftz)?\.f(?:32|64)\b")
_FMA32 = re.compile(r"\bfma\.rn(?:\.ftz)?\.f32\b")
# Tensor-core instructions: Hopper's warpgroup MMA and the warp-level mma.sync (Ampere and later;
# fp64's DMMA too), and every asynchronous global-to-shared copy (the pipelined loads)
_WGMMA = re.compile(r"\bwgmma\.mma_async\b")
_MMA = re.compile(r"\bmma\.sync\b")
_CP_ASYNC_ANY = re.compile(r"\bcp\.async\.c[ag]\b")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def compile_one(kernels, kernel, signature, constexprs, options, arch):
    """Compiles one configuration; returns its resources as ptxas and Triton report them."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = getattr(kernels, kernel)
    # every pointer 16-byte aligned, as launch.run passes them
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name, t in signature.items() if t[0] == "*"}
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", arch, 32), options=options)
    text = log.getvalue()
    regs, spills = _PTXAS.search(text), _SPILLS.search(text)
    if regs is None or spills is None:
        raise RuntimeError(f"{kernel}: no ptxas resource report in the compile log:\n{text}")
    return {"registers": int(regs.group(1)), "spill_stores": int(spills.group(1)),
            "spill_loads": int(spills.group(2)), "shared": compiled.metadata.shared,
            "cubin_bytes": len(compiled.asm["cubin"]), "fma": len(_FMA.findall(compiled.asm["ptx"])), "fma_f32": len(_FMA32.findall(compiled.asm["ptx"])),
            "wgmma": len(_WGMMA.findall(compiled.asm["ptx"])), "mma": len(_MMA.findall(compiled.asm["ptx"])),
            "cp_async": len(_CP_ASYNC_ANY.findall(compiled.asm["ptx"])),
            **load_widths(compiled.asm["ptx"])}


def compile_all(only=frozenset()):
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("tools/cuda_compile_check/cubins.py: run without TRITON_INTERPRET "
                           "(the interpreter cannot compile)")
    from triton import knobs
    knobs.nvidia.dump_ptxas_log = True  # ptxas -v output, captured per compile
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache             # a cold cache: every configuration runs ptxas
        from mx_sparse._cuda import batch_norm_kernels, gather_kernels, map_kernels, plan_kernels
        modules = (gather_kernels, batch_norm_kernels, map_kernels, plan_kernels)
        records = []
        for kernel, dtype, precision, tile, signature, constexprs, options in configurations():
            if only and kernel not in only:
                continue
            module = next(m for m in modules if hasattr(m, kernel))
            for arch in ARCHS:
                record = {"kernel": kernel, "dtype": dtype, "precision": precision, "tile": tile, "arch": f"sm_{arch}",
                          "channels_first": bool(constexprs.get("CHANNELS_FIRST", False)),
                          "activation": bool(constexprs.get("ACTIVATION", False)),
                          "weight_t": bool(constexprs.get("WEIGHT_T", False))}
                record.update(compile_one(module, kernel, signature, constexprs, options, arch))
                records.append(record)
    return records


def problems(records):
    """What makes a configuration unfit to ship: spills, too much shared memory, too many registers."""
    found = []
    for r in records:
        arch = int(r["arch"][3:])
        variant = "+activation" if r.get("activation") else "+weight_t" if r.get("weight_t") else ""
        name = f"{r['kernel']}{variant} {r['dtype']}/{r['precision']} {r['tile']} {r['arch']}"
        if r["spill_stores"] or r["spill_loads"]:
            found.append(f"{name}: spills ({r['spill_stores']} B stored, {r['spill_loads']} B loaded)")
        if r["shared"] > MAX_SHARED[arch]:
            found.append(f"{name}: {r['shared']} B shared memory > {MAX_SHARED[arch]} B")
        if r["registers"] > MAX_REGISTERS:
            found.append(f"{name}: {r['registers']} registers > {MAX_REGISTERS}")
        if r["kernel"] in BATCH_NORM_KERNELS and r.get("fma", 0):
            found.append(f"{name}: {r['fma']} fused multiply-adds (the CPU kernels round a * b + c twice)")
        if r["tile"].endswith("a") and r.get("ld_b16_scalar", 0):
            found.append(f"{name}: aligned variant with {r['ld_b16_scalar']} scalar 16-bit global loads")
        if (r["tile"].endswith("a") and r["kernel"] == "gather_mm_kernel" and r["dtype"] != "fp64"
                and r.get("cp_async_4", 0) and not (r["precision"] == "tf32" and r.get("channels_first"))):
            # (TF32 with the channels first: tf32 wgmma takes K-major operands only, and the
            # weights lie output-channel-major, so they copy 4 bytes at a time; the features
            # still copy as 16-byte vectors)
            # the gather's pipelined operands are the features and weights (map entries load directly)
            found.append(f"{name}: aligned variant with {r['cp_async_4']} four-byte cp.async copies")
        found += _gemm_problems(r, name)
    return found


GEMM_KERNELS = ("gather_mm_kernel", "filter_splits_kernel")
# The weight-gradient kernel's budget: 128 registers a thread (4 blocks of 128 threads per SM)
FILTER_MAX_REGISTERS = 128


def _gemm_problems(r, name):
    """The GEMM kernels: tensor cores exactly where the mode allows them (fp16/bf16, fp32 as
    TF32: wgmma on sm_90 where the tile puts 64+ output channels on the MMA's M side, mma.sync
    otherwise; fp32 IEEE: FMA only), and the weight-gradient kernel within its register budget
    with pipelined (cp.async) loads wherever a step's loads are 4+ bytes wide."""
    if r["kernel"] not in GEMM_KERNELS:
        return []
    found = []
    tensor_cores = r["dtype"] in ("fp16", "bf16") or r["precision"] == "tf32"
    if tensor_cores and not (r.get("wgmma", 0) or r.get("mma", 0)):
        found.append(f"{name}: no tensor-core instruction in a {r['dtype']}/{r['precision']} configuration")
    # float32 FMAs: the dot's arithmetic where it ran on CUDA cores (the float64 ones of the
    # gather's tile-moments epilogue, STATS, are not the dot)
    dot_fma = r.get("fma_f32", r.get("fma", 0))
    if tensor_cores and dot_fma:
        found.append(f"{name}: {dot_fma} float32 FMA in a tensor-core configuration")
    if r["dtype"] == "fp32" and r["precision"] == "ieee" and (r.get("wgmma", 0) or r.get("mma", 0)):
        found.append(f"{name}: tensor-core instructions under fp32 IEEE")
    if r.get("channels_first") and r["arch"] == "sm_90" and not r.get("wgmma", 0):
        found.append(f"{name}: 64+ output channels on the MMA's M side but no wgmma on sm_90")
    if r["arch"] == "sm_80" and r.get("wgmma", 0):
        found.append(f"{name}: wgmma on sm_80")
    if r["kernel"] == "filter_splits_kernel":
        if r["registers"] > FILTER_MAX_REGISTERS:
            found.append(f"{name}: {r['registers']} registers > {FILTER_MAX_REGISTERS}")
        wide = r["tile"].endswith("a") or r["dtype"] in ("fp32", "fp64")
        if wide and not r.get("cp_async", 0):
            found.append(f"{name}: no cp.async (the row loop's loads are not pipelined)")
    return found


def table(records) -> str:
    """One row per configuration: per architecture registers / spill bytes / shared bytes, then
    the dot's instructions (wgmma, mma.sync, fma) and the cp.async copies in its PTX."""
    lines = ["| kernel | dtype | precision | tile | sm_80 regs / spills / smem | sm_80 mma / fma / cp.async "
             "| sm_90 regs / spills / smem | sm_90 wgmma / mma / fma / cp.async |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows = {}
    for r in records:
        kernel = r["kernel"] + (" (activation)" if r.get("activation") else " (weight transposed)" if r.get("weight_t") else "")
        rows.setdefault((kernel, r["dtype"], r["precision"], r["tile"]), {})[r["arch"]] = r
    for (kernel, dtype, precision, tile), per_arch in rows.items():
        a, h = per_arch["sm_80"], per_arch["sm_90"]
        resources = [f"{x['registers']} / {x['spill_stores'] + x['spill_loads']} / {x['shared']}" for x in (a, h)]
        lines.append(f"| {kernel} | {dtype} | {precision} | {tile}{' (channels first)' if a.get('channels_first') else ''} "
                     f"| {resources[0]} | {a.get('mma', 0)} / {a.get('fma', 0)} / {a.get('cp_async', 0)} "
                     f"| {resources[1]} | {h.get('wgmma', 0)} / {h.get('mma', 0)} / {h.get('fma', 0)} / "
                     f"{h.get('cp_async', 0)} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON record per configuration and architecture")
    parser.add_argument("--kernels", default="", help="only these kernels (comma-separated names), e.g. "
                                                      "gather_mm_kernel,filter_splits_kernel")
    args = parser.parse_args(argv)
    records = compile_all(set(filter(None, args.kernels.split(","))))
    if args.json:
        print(json.dumps(records))
    else:
        import triton
        print(f"triton {triton.__version__}, {len(records)} compiles\n")
        print(table(records))
    bad = problems(records)
    for p in bad:
        print("PROBLEM:", p, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
