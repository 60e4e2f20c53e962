"""Fidelity tests of the emulated AscendC APIs.

fid_datacopy / fid_vector / fid_matmul / fid_launch check themselves against expected values
written from the API semantics (ASCENDC_REFERENCE.md §3-§5). Cast results are checked here
against an independent numpy/fractions reference."""
import json
from fractions import Fraction

import numpy as np
import pytest

from ascend_sim_build import run_bin


def _ok(proc):
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "ALL OK" in proc.stdout, proc.stdout[-4000:]


def test_datacopy_and_atomics(sim_bins):
    _ok(run_bin(sim_bins["fid_datacopy"]))


def test_vector_ops(sim_bins):
    _ok(run_bin(sim_bins["fid_vector"]))


def test_matmul(sim_bins):
    _ok(run_bin(sim_bins["fid_matmul"]))


@pytest.mark.parametrize("env", [{}, {"ASCEND_SIM_AIC_NUM": "3"}])
def test_cann_style_two_unit_harness(sim_bins, env):
    """Kernel and CPU-debug harness in separate translation units, built by cpu_debug_build.sh."""
    _ok(run_bin(sim_bins["tu_add"], env_extra=env))


@pytest.mark.parametrize("env", [{}, {"ASCEND_SIM_SEED": "11"}, {"ASCEND_SIM_SOC": "Ascend910B3"}])
def test_gather_mm_integration(sim_bins, env):
    """A miniature gather_mm (per-row gathers, workspace staging, fp16 Matmul, atomic output)."""
    _ok(run_bin(sim_bins["fid_gather_mm"], env_extra=env))


@pytest.mark.parametrize("env", [{}, {"ASCEND_SIM_SOC": "Ascend910B4"}, {"ASCEND_SIM_AIC_NUM": "1"},
                                 {"ASCEND_SIM_AIC_NUM": "3", "ASCEND_SIM_SEED": "7"}, {"ASCEND_SIM_SERIAL": "1"}])
def test_launch_geometry_and_sync(sim_bins, env, tmp_path):
    stats = tmp_path / "stats.jsonl"
    env = dict(env, ASCEND_SIM_STATS=str(stats))
    proc = run_bin(sim_bins["fid_launch"], env_extra=env)
    _ok(proc)
    aic = int(env.get("ASCEND_SIM_AIC_NUM", "20" if env.get("ASCEND_SIM_SOC") == "Ascend910B4" else "24"))
    assert f"platform aic={aic} aiv={2 * aic}" in proc.stdout
    records = [json.loads(line) for line in stats.read_text().splitlines()]
    byname = {r["kernel"]: r for r in records}
    # k_stats moves 64 floats in and out on each of its 2 cores and runs a 64-element Adds, a
    # 64-element uint32 Duplicate and a 64-element Gather (one 256-byte repeat each).
    st = byname["k_stats"]
    assert st["block_dim"] == 2 and len(st["cores"]) == 2
    assert st["total"]["gm_to_ub_bytes"] == 2 * 256
    assert st["total"]["ub_to_gm_bytes"] == 2 * 256
    assert st["total"]["vector_elems"] == 2 * 3 * 64
    assert st["total"]["vector_instr"] == 2 * 3
    assert st["total"]["vector_gather_instr"] == 2 * 1
    assert st["total"]["scalar_gm_get"] == 2 and st["total"]["scalar_ub_set"] == 2
    mm = byname["k_mm_stats"]
    assert mm["mode"] == "MIX_AIC_1_2" and mm["total"]["cube_flops"] == 2 * 2 * 16 * 8 * 4
    # each of the 2 AIVs: A 16x4, B 4x8 read, C 16x8 written (fp32)
    assert mm["total"]["matmul_gm_bytes"] == 2 * (16 * 4 + 4 * 8 + 16 * 8) * 4


# ---------------------------------------------------------------- Cast reference
MODES = {0: "NONE", 1: "RINT", 2: "FLOOR", 3: "CEIL", 4: "ROUND", 5: "TRUNC", 6: "ODD"}


def _decode(kind, raw):
    raw = int(raw)
    if kind == "float":
        return np.array([raw], dtype=np.uint32).view(np.float32)[0]
    if kind == "half":
        return np.array([raw], dtype=np.uint16).view(np.float16)[0]
    if kind == "bf16":
        return np.array([raw << 16], dtype=np.uint32).view(np.float32)[0]
    return raw


def _exact(kind, v):
    if kind in ("float", "half", "bf16"):
        f = float(v)
        return f if not np.isfinite(f) else Fraction(f)
    return Fraction(int(v))


def _bits(kind, v):
    if kind == "float":
        return int(np.array([v], dtype=np.float32).view(np.uint32)[0])
    if kind == "half":
        return int(np.array([v], dtype=np.float16).view(np.uint16)[0])
    raise AssertionError(kind)


def _pick(x, lo, hi, lo_even, mode):
    """Choose between consecutive representables lo < x < hi (Fractions)."""
    if mode == 2:
        return "lo"
    if mode == 3:
        return "hi"
    if mode == 5:
        return "lo" if x > 0 else "hi"
    if mode == 6:
        return "hi" if lo_even else "lo"
    dlo, dhi = x - lo, hi - x
    if dlo < dhi:
        return "lo"
    if dhi < dlo:
        return "hi"
    if mode == 4:  # ties away from zero
        return "hi" if x > 0 else "lo"
    return "lo" if lo_even else "hi"


def _to_float_format(x, mode, dtype):
    """Round exact value x to float16/float32 with `mode`; returns numpy scalar."""
    if not isinstance(x, Fraction):
        return dtype(x)
    finfo = np.finfo(dtype)
    mx = Fraction(float(finfo.max))
    with np.errstate(over="ignore"):
        r = dtype(float(x)) if abs(x) < 2 ** 1000 else dtype(np.inf)
        if np.isfinite(r) and Fraction(float(r)) == x:
            return r
        # neighbours lo < x < hi in dtype; overflow side uses a virtual value max + ulp
        if abs(x) > mx:
            ulp = mx - Fraction(float(np.nextafter(dtype(finfo.max), dtype(0))))
            s = 1 if x > 0 else -1
            near, far = s * mx, s * (mx + ulp)   # far stands for +-inf (its mantissa is even)
            lo, hi = (near, far) if s > 0 else (far, near)
            lo_even = s < 0                       # lo is the virtual value when negative
            choice = _pick(x, lo, hi, lo_even, mode)
            val = lo if choice == "lo" else hi
            return dtype(np.inf * s) if val == far else dtype(float(near))
        if Fraction(float(r)) < x:
            lo_v, hi_v = r, np.nextafter(r, dtype(np.inf))
        else:
            lo_v, hi_v = np.nextafter(r, dtype(-np.inf)), r
        lo_bits = _bits("half" if dtype == np.float16 else "float", lo_v)
        lo_even = (lo_bits & 1) == 0
        choice = _pick(x, Fraction(float(lo_v)), Fraction(float(hi_v)), lo_even, mode)
        return lo_v if choice == "lo" else hi_v


def _to_bf16_bits(x, mode):
    f32 = np.float32(float(x)) if isinstance(x, Fraction) else np.float32(x)
    b = int(np.array([f32], dtype=np.float32).view(np.uint32)[0])
    sign = b & 0x80000000
    mag = b & 0x7FFFFFFF
    if mag >= 0x7F800000:
        return (b >> 16) & 0xFFFF
    down, rem = mag >> 16, mag & 0xFFFF
    if rem == 0:
        return (sign >> 16) | down
    up = down + 1
    neg = sign != 0
    if mode == 5:
        m = down
    elif mode == 2:
        m = up if neg else down
    elif mode == 3:
        m = down if neg else up
    elif mode == 4:
        m = up if rem >= 0x8000 else down
    else:
        m = up if (rem > 0x8000 or (rem == 0x8000 and (down & 1))) else down
    if m >= 0x7F80:  # overflow
        if mode in (1, 4) or (mode == 3 and not neg) or (mode == 2 and neg):
            m = 0x7F80
        else:
            m = 0x7F7F
    return (sign >> 16) | m


def _round_int(x, mode):
    if mode in (0, 1):
        return round(x)  # Fraction.__round__ is round-half-even
    if mode == 2:
        return x.__floor__()
    if mode == 3:
        return x.__ceil__()
    if mode == 5:
        return int(x)  # truncation toward zero
    if mode == 4:
        s = 1 if x >= 0 else -1
        return s * (abs(x) + Fraction(1, 2)).__floor__()
    raise AssertionError(mode)


INT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
             "int64": (-2 ** 63, 2 ** 63 - 1)}


def _expected(src, dst, mode, raw_in):
    out = _expected_unsigned_zero(src, dst, mode, raw_in)
    v = _decode(src, raw_in)
    neg = src in ("float", "half", "bf16") and bool(np.signbit(v))
    sign_bit = {"half": 0x8000, "bf16": 0x8000, "float": 0x80000000}.get(dst)
    if sign_bit and neg and (out & ~sign_bit) == 0:
        out |= sign_bit   # IEEE: a zero result keeps the sign of the operand
    return out


def _expected_unsigned_zero(src, dst, mode, raw_in):
    v = _decode(src, raw_in)
    x = _exact(src, v)
    if dst in INT_RANGE:
        lo, hi = INT_RANGE[dst]
        if src in INT_RANGE:
            # narrowing int casts keep the low bits (emulator choice, UNCONFIRMED on hardware)
            if dst == "int64":
                return int(x)
            bits = {"int32": 32, "int16": 16}[dst]
            n = int(x) & ((1 << bits) - 1)
            return n - (1 << bits) if n >= 1 << (bits - 1) else n
        return max(lo, min(hi, _round_int(x, mode)))
    if dst == "bf16":
        return _to_bf16_bits(x, mode)
    if dst == "float" and src == "float":
        return _bits("float", np.float32(float(_round_int(x, mode))) if isinstance(x, Fraction) else np.float32(x))
    dtype = np.float16 if dst == "half" else np.float32
    return _bits(dst, _to_float_format(x, mode, dtype))


def test_cast_against_numpy_reference(sim_bins):
    proc = run_bin(sim_bins["fid_cast"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("CAST ")]
    assert "CAST-DONE" in proc.stdout and len(lines) > 1500
    bad = []
    for _, src, dst, mode, raw_in, raw_out in lines:
        exp = _expected(src, dst, int(mode), raw_in)
        if int(raw_out) != int(exp):
            bad.append(f"{src}->{dst} {MODES[int(mode)]} in={raw_in} got={raw_out} expected={exp}")
    assert not bad, "\n".join(bad[:40]) + f"\n({len(bad)} mismatches)"
