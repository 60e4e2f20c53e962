"""Verification item 2 of the CUDA backend: every kernel x dtype x tile configuration the
dispatcher can pick, COMPILED ahead of time to real GPU binaries for sm_80 (A100) and sm_90
(H100) by triton 3.8's own compiler and ptxas, in a subprocess without TRITON_INTERPRET;
per configuration the registers, spills and shared memory are recorded, and the test fails
on any spill or on shared memory over the architecture's limit."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_cases import environment_without_interpreter
from mx_sparse._cuda import tiles

# a verification tool, not part of the package: loaded from its file
CUBINS = Path(__file__).resolve().parents[2] / "tools" / "cuda_compile_check" / "cubins.py"
_spec = importlib.util.spec_from_file_location("cuda_compile_check_cubins", CUBINS)
cubins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cubins)


@pytest.fixture(scope="module")
def records():
    proc = subprocess.run([sys.executable, str(CUBINS), "--json"], capture_output=True, text=True,
                          env=environment_without_interpreter(), timeout=3600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_every_configuration_compiled_for_sm80_and_sm90(records):
    compiled = {(r["kernel"], r["dtype"], r["precision"], r["tile"], r["arch"]) for r in records}
    expected = {(kernel, dtype, precision, tile, f"sm_{arch}")
                for kernel, dtype, precision, tile, *_ in cubins.configurations() for arch in cubins.ARCHS}
    assert compiled == expected
    gather = {(d, t.name()) for d, t in tiles.GATHER_TILES}
    filt = {(d, t.name()) for d, t in tiles.FILTER_TILES}
    assert {(r["dtype"], r["tile"]) for r in records if r["kernel"] == "gather_mm_kernel"} == gather
    assert {(r["dtype"], r["tile"]) for r in records if r["kernel"] == "filter_splits_kernel"} == filt
    # each filter tile also as the variant that applies a fused BatchNorm+ReLU's activation on load
    assert {(r["dtype"], r["tile"]) for r in records if r["kernel"] == "filter_splits_kernel" and r["activation"]} == filt
    assert {r["kernel"] for r in records} >= set(cubins.BATCH_NORM_KERNELS) | set(cubins.MAP_KERNELS)
    assert all(r["cubin_bytes"] > 0 and 0 < r["registers"] <= cubins.MAX_REGISTERS for r in records)


def test_no_spills_and_shared_memory_within_limits(records):
    assert cubins.problems(records) == []


def test_the_resource_check_can_fail():
    ok = {"kernel": "k", "dtype": "fp32", "precision": "ieee", "tile": "t", "arch": "sm_80", "registers": 100,
          "spill_stores": 0, "spill_loads": 0, "shared": 1024}
    assert cubins.problems([ok]) == []
    assert cubins.problems([dict(ok, spill_stores=8)])
    assert cubins.problems([dict(ok, shared=cubins.MAX_SHARED[80] + 1)])
    assert not cubins.problems([dict(ok, arch="sm_90", shared=cubins.MAX_SHARED[80] + 1)])
    assert not cubins.problems([dict(ok, fma=3)])                       # a gather kernel may contract
    assert cubins.problems([dict(ok, kernel="backward_dx_kernel", fma=1)])


def test_the_tensor_core_and_filter_checks_can_fail():
    g = {"kernel": "gather_mm_kernel", "dtype": "fp16", "precision": "ieee", "tile": "m32n64k32w4s2", "arch": "sm_90",
         "registers": 100, "spill_stores": 0, "spill_loads": 0, "shared": 1024, "wgmma": 2, "mma": 0, "fma": 0,
         "cp_async": 4, "channels_first": True}
    assert cubins.problems([g]) == []
    assert cubins.problems([dict(g, wgmma=0)])                                 # channels first, no wgmma on sm_90
    assert cubins.problems([dict(g, wgmma=0, mma=4, channels_first=False)]) == []
    assert cubins.problems([dict(g, arch="sm_80")])                            # wgmma on sm_80
    assert cubins.problems([dict(g, wgmma=0, mma=0, channels_first=False)])    # fp16 without tensor cores
    assert cubins.problems([dict(g, fma=8)])                                   # FMA in a tensor-core mode
    ieee = dict(g, dtype="fp32", wgmma=0, mma=0, fma=128, channels_first=False)
    assert cubins.problems([ieee]) == []
    assert cubins.problems([dict(ieee, mma=4)])                                # fp32 IEEE must stay FMA
    dw = dict(ieee, kernel="filter_splits_kernel")
    assert cubins.problems([dw]) == []
    assert cubins.problems([dict(dw, registers=cubins.FILTER_MAX_REGISTERS + 1)])
    assert cubins.problems([dict(dw, cp_async=0)])                             # fp32 loads not pipelined
    assert cubins.problems([dict(dw, dtype="fp16", precision="ieee", fma=0, mma=2, cp_async=0)]) == []  # 2-byte gathers
