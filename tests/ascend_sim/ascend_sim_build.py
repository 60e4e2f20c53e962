"""Build helpers for the AscendC emulator tests.

Every test program is built with the stable entry point
``tools/ascend_emulator/cpu_debug_build.sh OUT SOURCE...`` (g++ -std=c++17), the same way a
tool or a CANN-style CPU-debug harness would be built. Binaries go to
``tools/ascend_emulator/build/tests`` (gitignored)."""
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EMULATOR = REPO / "tools" / "ascend_emulator"
BUILD_SCRIPT = EMULATOR / "cpu_debug_build.sh"
OUT_DIR = EMULATOR / "build" / "tests"

PROGRAMS = ["fid_datacopy", "fid_vector", "fid_cast", "fid_matmul", "fid_launch", "fid_gather_mm", "bad_kernels",
            "tu_add", "scalar_count"]
# programs built from several translation units (kernel and harness kept apart, CANN style)
SOURCES = {"tu_add": ["tu_add_kernel.cpp", "tu_add_harness.cpp"],
           "scalar_count": ["scalar_count_kernel.cpp", "scalar_count_harness.cpp"]}
# kernel translation units: passed with -k so that their own basic blocks are counted (scalar_blocks)
KERNEL_TUS = {"tu_add_kernel.cpp", "scalar_count_kernel.cpp"}


def build(name: str) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / name
    srcs = []
    for f in SOURCES.get(name, [f"{name}.cpp"]):
        srcs += ["-k", str(HERE / f)] if f in KERNEL_TUS else [str(HERE / f)]
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), str(out), *srcs], capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"building {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return out


def build_all():
    # Build the emulator library once, then the programs two at a time (2-core machines).
    first = build(PROGRAMS[0])
    with ThreadPoolExecutor(max_workers=2) as ex:
        outs = list(ex.map(build, PROGRAMS[1:]))
    return dict(zip(PROGRAMS, [first] + outs))


def run_bin(path, args=(), env_extra=None, timeout=120):
    env = dict(os.environ)
    for k in ("ASCEND_SIM_SOC", "ASCEND_SIM_AIC_NUM", "ASCEND_SIM_SEED", "ASCEND_SIM_STATS", "ASCEND_SIM_STRICT",
              "ASCEND_SIM_SERIAL", "ASCEND_SIM_HAZARDS"):
        env.pop(k, None)
    if env_extra:
        env.update(env_extra)
    return subprocess.run([str(path), *args], capture_output=True, text=True, env=env, timeout=timeout)
