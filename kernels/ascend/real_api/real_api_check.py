#!/usr/bin/env python3
"""Type-check the mx_sparse AscendC sources against Huawei's real AscendC headers.

    MXS_ASC_DEVKIT=/path/to/asc-devkit python kernels/ascend/real_api/real_api_check.py [-j 2] [-v]

MXS_ASC_DEVKIT (or --devkit) is an asc-devkit checkout (a directory holding include/kernel_operator.h)
or a bare git clone of it (its HEAD is extracted to a temporary directory). Nothing from it is copied
into this repository: every file the check generates (the devkit's kernel_tiling.h, the links that
reproduce the installed header layout) lives in a temporary build directory.

What is checked, all with g++ -fsyntax-only (C++17), in the devkit's CPU-debug configuration
(ASCENDC_CPU_DEBUG=1) for Atlas A2 (__NPU_ARCH__=2201, the vector-core build __DAV_C220_VEC__; in
CPU-debug the AIC/AIV role is the run-time value g_coreType, so this one build also type-checks the
AIC side of REGIST_MATMUL_OBJ, i.e. the Matmul server loop):

  kernels   every kernels/ascend/*/op_kernel/*.cpp with its common/op_kernel headers, every dtype
            instantiation (TILING_KEY_IS is a run-time test in CPU-debug, so all branches compile);
  tiling    every op_host/*_tiling.cpp against the devkit's generated kernel_tiling.h (TCubeTiling);
  glue      every op_host/*_cann.cpp against the devkit's tiling/platform/platform_ascendc.h and
            tiling/tiling_api.h (matmul_tiling::MatmulApiTiling);
  layout    TCubeTiling of the emulator (kernels/ascend/sim) equals the devkit's field by field
            (names, offsets, size): tiling structs embed it and are copied bytewise host -> device;
  probes    probes/api_accept.cpp (every API form the emulator implements, as the kernels call
            them) compiles against both the devkit and the emulator; each probes/reject/*.cpp
            (a misuse the real headers reject at compile time) fails against both.

Closed pieces that the open headers need -- tikicpulib's stub_def.h / stub_fun.h / kernel_fp16.h /
kernel_bf16.h, the op compiler's generated GET_TILING_DATA macros, metadef's register/ and graph/
headers -- are replaced by declared-only stand-ins written for this check (standins/). The
intrinsics in stub_fun.h accept any arguments: what is checked is our use of the public AscendC
API (its overloads, templates and static_asserts, which are all in the open headers), not the
intrinsic layer beneath it.
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASCEND = HERE.parent
STANDINS = HERE / "standins"
SIM_INCLUDE = ASCEND / "sim" / "include"
CXX = os.environ.get("CXX", "g++")

# The CPU-debug configuration of an Atlas A2 (arch 2201) vector-core TU, as the devkit's own
# CPU-mode unit tests for ascend910B1_AIV set it up.
DEVICE_DEFINES = ["-DASCENDC_CPU_DEBUG=1", "-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_VEC__",
                  "-D__DAV_VEC__", "-DASCENDC_DUMP=0"]


class DevkitError(RuntimeError):
    pass


def locate_devkit(path):
    """Directory of an asc-devkit tree: `path` itself, or HEAD of a bare git clone extracted to a
    temporary directory (removed by the caller)."""
    p = Path(path).expanduser().resolve()
    if (p / "include" / "kernel_operator.h").is_file():
        return p, None
    if (p / "HEAD").is_file() and (p / "objects").is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="mxs_asc_devkit_"))
        archive = subprocess.run(["git", "-C", str(p), "archive", "HEAD", "include", "impl"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            shutil.rmtree(tmp)
            raise DevkitError(f"git archive of {p} failed: {archive.stderr.decode(errors='replace')}")
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        return tmp, tmp
    raise DevkitError(f"{p} is neither an asc-devkit checkout (include/kernel_operator.h) nor a bare git clone")


def prepare_build(devkit, build):
    """Generated header and installed-layout links of the devkit, inside `build` (never the repo)."""
    gen = devkit / "impl" / "adv_api" / "cmake" / "scripts" / "gen_kernel_tiling_data_def.py"
    if not gen.is_file():
        raise DevkitError(f"{gen} not found: not an asc-devkit tree this check knows")
    (build / "kernel_tiling").mkdir(parents=True)
    r = subprocess.run([sys.executable, str(gen), str(devkit / "include" / "adv_api"),
                        str(build / "kernel_tiling" / "kernel_tiling.h")], capture_output=True, text=True)
    if r.returncode != 0 or not (build / "kernel_tiling" / "kernel_tiling.h").is_file():
        raise DevkitError("generating kernel_tiling.h failed:\n" + r.stdout + r.stderr)
    # the installed CANN layout: lib/ = include/adv_api (matmul_intf.h under matmul/),
    # tiling/platform = include/utils/tiling/platform, tiling/tiling_api.h = include/adv_api/tiling_api.h
    (build / "lib").mkdir()
    (build / "lib" / "matmul_intf.h").symlink_to(devkit / "include" / "adv_api" / "matmul" / "matmul_intf.h")
    (build / "tiling").mkdir()
    (build / "tiling" / "tiling_api.h").symlink_to(devkit / "include" / "adv_api" / "tiling_api.h")
    (build / "tiling" / "platform").symlink_to(devkit / "include" / "utils" / "tiling" / "platform")


def device_flags(devkit, build):
    inc = [STANDINS / "device", build, devkit, devkit / "include", devkit / "include" / "basic_api",
           devkit / "include" / "utils", devkit / "impl", devkit / "impl" / "basic_api",
           devkit / "include" / "adv_api", devkit / "include" / "adv_api" / "matmul",
           devkit / "impl" / "adv_api", devkit / "impl" / "utils"]
    return (["-std=c++17", "-fsyntax-only"] + DEVICE_DEFINES + [f"-I{p}" for p in inc]
            + ["-include", str(STANDINS / "device" / "mxs_kernel_launch.h")])


def host_flags(devkit, build):
    inc = [STANDINS / "host", build, devkit / "include" / "adv_api", devkit / "include" / "utils",
           devkit / "include"]
    return ["-std=c++17", "-fsyntax-only"] + [f"-I{p}" for p in inc]


def emulator_flags():
    return ["-std=c++17", "-fsyntax-only", f"-I{SIM_INCLUDE}"]


def compile_ok(flags, src):
    r = subprocess.run([CXX] + flags + [str(src)], capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def first_errors(stderr, n=12):
    lines = [l for l in stderr.splitlines() if " error: " in l or "static assertion failed" in l]
    return "\n".join(lines[:n]) or stderr[-2000:]


def rel(p):
    try:
        return str(Path(p).relative_to(ASCEND.parent.parent))
    except ValueError:
        return str(p)


# ------------------------------------------------------------------------------------ the checks
def kernel_sources():
    return sorted(ASCEND.glob("*/op_kernel/*.cpp"))


def tiling_sources():
    return sorted(ASCEND.glob("*/op_host/*_tiling.cpp"))


def glue_sources():
    return sorted(ASCEND.glob("*/op_host/*_cann.cpp"))


def layout_check(devkit, build):
    """TCubeTiling: the emulator's struct must have the devkit's fields at the devkit's offsets."""
    real_h = (build / "kernel_tiling" / "kernel_tiling.h").read_text()
    m = re.search(r"struct TCubeTiling \{(.*?)\};", real_h, re.S)
    if not m:
        return False, "TCubeTiling not found in the generated kernel_tiling.h"
    fields = re.findall(r"^\s*[\w:]+\s+(\w+)(?:\[\d+\])?\s*=", m.group(1), re.M)
    prog = ("#include <cstdint>\n#include <cstdio>\n#include <cstddef>\n#include \"kernel_tiling/kernel_tiling.h\"\n"
            "int main() { std::printf(\"size %zu\\n\", sizeof(TCubeTiling));\n"
            + "".join(f"  std::printf(\"{f} %zu\\n\", offsetof(TCubeTiling, {f}));\n" for f in fields) + "}\n")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "layout.cpp"
        src.write_text(prog)
        for name, inc in [("devkit", build), ("emulator", SIM_INCLUDE)]:
            exe = Path(tmp) / name
            r = subprocess.run([CXX, "-std=c++17", f"-I{inc}", str(src), "-o", str(exe)], capture_output=True, text=True)
            if r.returncode != 0:
                return False, f"TCubeTiling layout program does not build against the {name}:\n{first_errors(r.stderr)}"
            out[name] = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    if out["devkit"] != out["emulator"]:
        diff = [f"  devkit {a!r} vs emulator {b!r}" for a, b in zip(out["devkit"].splitlines(), out["emulator"].splitlines()) if a != b]
        return False, "TCubeTiling differs between the devkit and the emulator:\n" + "\n".join(diff[:10])
    return True, f"{len(fields)} fields, {out['devkit'].splitlines()[0]}"


GROUPS = ("kernels", "tiling", "glue", "probes", "layout")


def run(devkit_path, jobs=2, verbose=False, extra_kernels=(), groups=GROUPS):
    """Run the checks of `groups`; returns (ok, report lines)."""
    devkit, cleanup = locate_devkit(devkit_path)
    build = Path(tempfile.mkdtemp(prefix="mxs_asc_build_"))
    report, ok = [], True
    try:
        prepare_build(devkit, build)
        dflags, hflags, eflags = device_flags(devkit, build), host_flags(devkit, build), emulator_flags()
        tasks = []  # (group, source, flags, expect_ok)
        kernels = list(kernel_sources()) if "kernels" in groups else []
        for src in kernels + [Path(k) for k in extra_kernels]:
            tasks.append(("kernel", src, dflags, True))
        for src in tiling_sources() if "tiling" in groups else []:
            tasks.append(("tiling", src, hflags, True))
        for src in glue_sources() if "glue" in groups else []:
            tasks.append(("glue", src, hflags, True))
        if "probes" in groups:
            accept = HERE / "probes" / "api_accept.cpp"
            tasks.append(("probe accept (devkit)", accept, dflags, True))
            tasks.append(("probe accept (emulator)", accept, eflags, True))
            for src in sorted((HERE / "probes" / "reject").glob("*.cpp")):
                tasks.append(("probe reject (devkit)", src, dflags, False))
                tasks.append(("probe reject (emulator)", src, eflags, False))
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            results = list(pool.map(lambda t: compile_ok(t[2], t[1]), tasks))
        for (group, src, _, expect_ok), (compiled, stderr) in zip(tasks, results):
            good = compiled == expect_ok
            ok &= good
            if good:
                report.append(f"ok    {group:24s} {rel(src)}")
                if verbose and not compiled:
                    report.append("      rejected with: " + first_errors(stderr, 2).replace("\n", "\n      "))
            elif expect_ok:
                report.append(f"FAIL  {group:24s} {rel(src)}\n" + first_errors(stderr))
            else:
                report.append(f"FAIL  {group:24s} {rel(src)} compiled, but the devkit rejects this misuse")
        if "layout" in groups:
            good, msg = layout_check(devkit, build)
            ok &= good
            report.append(f"{'ok  ' if good else 'FAIL'}  {'layout TCubeTiling':24s} {msg}")
    finally:
        shutil.rmtree(build, ignore_errors=True)
        if cleanup:
            shutil.rmtree(cleanup, ignore_errors=True)
    return ok, report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devkit", default=os.environ.get("MXS_ASC_DEVKIT"),
                    help="asc-devkit checkout or bare git clone (default: $MXS_ASC_DEVKIT)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true", help="also show how each reject probe is rejected")
    ap.add_argument("--kernel", action="append", default=[], help="also check this kernel source (e.g. a scratch file)")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated subset of {','.join(GROUPS)}")
    args = ap.parse_args(argv)
    groups = tuple(g for g in args.only.split(",") if g)
    unknown = set(groups) - set(GROUPS)
    if unknown:
        print(f"real_api_check: unknown group(s) {sorted(unknown)}; choose from {GROUPS}", file=sys.stderr)
        return 2
    if not args.devkit:
        print("real_api_check: set MXS_ASC_DEVKIT (or --devkit) to an asc-devkit checkout", file=sys.stderr)
        return 2
    try:
        ok, report = run(args.devkit, args.jobs, args.verbose, args.kernel, groups)
    except DevkitError as e:
        print(f"real_api_check: {e}", file=sys.stderr)
        return 2
    print("\n".join(report))
    print("real_api_check: " + ("all checks passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
