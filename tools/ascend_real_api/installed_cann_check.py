#!/usr/bin/env python3
"""Type-check mx_sparse's AscendC sources against an INSTALLED CANN toolkit.

    source /usr/local/Ascend/ascend-toolkit/set_env.sh
    python tools/ascend_real_api/installed_cann_check.py [-j 2] [--cann DIR]

Only an installed toolkit is used (``ASCEND_HOME_PATH``, or --cann): its AscendC headers
(CANN 8.0-8.5: ``compiler/tikcpp/tikcfw``; 8.5+/9.x: ``<arch>-linux/asc``), the installed
``kernel_tiling/kernel_tiling.h``, the tiling/platform, ``register/`` and ``graph/`` headers and
tikicpulib's own stub headers. Nothing is downloaded, extracted or generated. The CANN version
checked is printed first (and in --json). Without a toolkit the check prints why and exits 0
("skipped"); a toolkit that lacks a header the sources need fails, naming the header.

Checked with g++ -fsyntax-only (C++17) in CANN's CPU-debug configuration for Atlas A2
(ASCENDC_CPU_DEBUG, __NPU_ARCH__=2201):
  kernels  kernels/ascend/*/op_kernel/*.cpp  (+ the probes: tools/ascend_real_api/probes/api_accept.cpp
           must compile, each probes/reject/*.cpp must not)
  tiling   kernels/ascend/*/op_host/*_tiling.cpp
  glue     kernels/ascend/*/op_host/*_cann.cpp
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ASCEND = REPO / "kernels" / "ascend"
CXX = os.environ.get("CXX", "g++")
DEVICE_DEFINES = ["-DASCENDC_CPU_DEBUG=1", "-D__NPU_ARCH__=2201", "-D__DAV_C220_VEC__"]

# header (as our sources include it) -> which compile needs it
REQUIRED_HEADERS = {
    "kernel_operator.h": "device",
    "lib/matmul_intf.h": "device",
    "kernel_tiling/kernel_tiling.h": "device",
    "tikicpulib.h": "device",
    "stub_def.h": "device",
    "register/op_def_registry.h": "host",
    "register/tilingdata_base.h": "host",
    "graph/types.h": "host",
    "tiling/platform/platform_ascendc.h": "host",
    "tiling/tiling_api.h": "host",
}


def _build_info():
    """mx_sparse/runtime/ascend_build_info.py, loaded by path (no torch needed)."""
    spec = importlib.util.spec_from_file_location("mxs_ascend_build_info", REPO / "mx_sparse" / "runtime" / "ascend_build_info.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def search_roots(cann):
    home = cann.home
    roots = [cann.kernel_include.parent if cann.layout == "tikcpp" else cann.kernel_include, home / "include",
             home / "tools" / "tikicpulib", home / "compiler" / "include"]
    roots += sorted(home.glob("*-linux/include")) + sorted(home.glob("*-linux/asc"))
    roots += sorted(home.glob("*-linux/tikicpulib"))
    return [r for r in dict.fromkeys(roots) if r.is_dir()]


def locate_headers(cann, wanted=REQUIRED_HEADERS):
    """{header: include directory} for every wanted header found under the toolkit's roots."""
    names = {Path(h).name: h for h in wanted}
    found = {}
    for root in search_roots(cann):
        for dirpath, _, files in os.walk(root):
            for f in files:
                h = names.get(f)
                if h is None or h in found:
                    continue
                p = Path(dirpath) / f
                if str(p).endswith("/" + h):
                    found[h] = Path(str(p)[: -len(h) - 1])
    return found


def include_flags(dirs):
    return [f"-I{d}" for d in dict.fromkeys(dirs)]


def our_include_dirs():
    return [ASCEND / "common" / "op_kernel", ASCEND.parent / "common"] + sorted(ASCEND.glob("*/op_host"))


def tasks_for(cann, found):
    dev_dirs = [found[h] for h, k in REQUIRED_HEADERS.items() if k == "device"]
    dev_dirs += [cann.kernel_include / "impl", cann.kernel_include / "interface"]
    host_dirs = [found[h] for h, k in REQUIRED_HEADERS.items() if k == "host"]
    dev = ["-std=c++17", "-fsyntax-only"] + DEVICE_DEFINES + include_flags(
        [d for d in dev_dirs if d.is_dir()] + our_include_dirs())
    host = ["-std=c++17", "-fsyntax-only"] + include_flags(host_dirs + our_include_dirs())
    t = [("kernel", s, dev, True) for s in sorted(ASCEND.glob("*/op_kernel/*.cpp"))]
    t += [("tiling", s, host, True) for s in sorted(ASCEND.glob("*/op_host/*_tiling.cpp"))]
    t += [("glue", s, host, True) for s in sorted(ASCEND.glob("*/op_host/*_cann.cpp"))]
    t.append(("probe accept", HERE / "probes" / "api_accept.cpp", dev, True))
    t += [("probe reject", s, dev, False) for s in sorted((HERE / "probes" / "reject").glob("*.cpp"))]
    return t


def compile_ok(flags, src):
    r = subprocess.run([CXX, *flags, str(src)], capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def run(env=os.environ, cann_dir=None, jobs=2, out=print):
    info = _build_info()
    if cann_dir:
        env = {**env, "ASCEND_HOME_PATH": str(cann_dir)}
    cann, why = info.find_cann(env)
    if cann is None:
        out(f"installed_cann_check: SKIPPED -- {why}")
        return {"status": "skipped", "reason": why}
    out(f"installed_cann_check: CANN {cann.version or 'version unknown'} at {cann.home} ({cann.layout} layout)")
    found = locate_headers(cann)
    missing = [h for h in REQUIRED_HEADERS if h not in found]
    result = {"status": "failed", "cann_version": cann.version, "cann_home": str(cann.home), "layout": cann.layout,
              "missing_headers": missing, "results": []}
    if missing:
        for h in missing:
            out(f"FAIL  header {h}: not found under {', '.join(str(r) for r in search_roots(cann))}")
        return result
    tasks = tasks_for(cann, found)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        outcomes = list(ex.map(lambda t: compile_ok(t[2], t[1]), tasks))
    bad = 0
    for (kind, src, _, want_ok), (ok, err) in zip(tasks, outcomes):
        good = ok == want_ok
        bad += not good
        rel = src.relative_to(REPO)
        out(f"{'ok  ' if good else 'FAIL'}  {kind} {rel}")
        if not good:
            errors = [l for l in err.splitlines() if " error: " in l][:8]
            out("\n".join(errors) or err[-1500:])
        result["results"].append({"kind": kind, "source": str(rel), "ok": good})
    result["status"] = "passed" if bad == 0 else "failed"
    out(f"installed_cann_check: {'all checks passed' if bad == 0 else f'{bad} check(s) failed'} "
        f"against CANN {cann.version or 'version unknown'}")
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cann", help="toolkit root (default: $ASCEND_HOME_PATH)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--json", help="also write the result (CANN version checked, per-file outcome) here")
    a = ap.parse_args(argv)
    res = run(cann_dir=a.cann, jobs=a.jobs)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 1 if res["status"] == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
