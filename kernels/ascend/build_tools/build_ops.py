"""Build and install mx_sparse's AscendC op package, then the torch_npu binding (kernels/ascend/build.sh).

The CANN custom-operator flow as CANN's documentation describes it ("Operator Project Creation" /
"Operator Project Building", Ascend C operator development guide):
  1. op description JSON -> `msopgen gen -i ops.json -c ai_core-<SoC> -lan cpp -out <project>`
     (the installed toolkit's own project generator; the JSON is written here from our OpDefs);
  2. our sources replace the generated stubs: op_host/ (OpDef + tiling registration + the plain-C++
     tiling) and op_kernel/ (kernel entries + their headers), both flat -- our sources include each
     other by file name -- plus mxs_cann_version.h (the toolkit version, for version-dependent glue);
  3. vendor name `mx_sparse` in the project's CMakePresets.json, then the project's build.sh, which
     compiles op_host into the tiling/proto libraries, op_kernel for the SoC, and generates the aclnn
     two-phase API (aclnn<Op>GetWorkspaceSize / aclnn<Op>) into libcust_opapi.so;
  4. the resulting custom_opp_*.run installed with --install-path into the Python package
     (mx_sparse/_ascend_opp/vendors/mx_sparse), which mx_sparse puts on ASCEND_CUSTOM_OPP_PATH when
     imported (mx_sparse/runtime/ascend_build_info.py) -- no separate .run step for the user;
  5. the torch_npu binding: `pip install --no-build-isolation -e .` (setup.py builds mx_sparse._C_npu
     when torch_npu and CANN are present; nothing is linked against the op package: the aclnn entry
     points are resolved at run time).
Everything that can be decided without CANN (arguments, toolchain detection, SoC selection, the
messages, the op description, the step plan) is plain Python, tested in tests/ascend/test_build_script.py.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

HERE = Path(__file__).resolve().parent
ASCEND = HERE.parent
REPO = ASCEND.parent.parent
sys.path.insert(0, str(HERE))
import op_sources  # noqa: E402

# SoCs the OpDefs register (AddConfig): Atlas A2 training (910B) and A3 (910_93)
SOC_PATTERN = re.compile(r"^Ascend(910B[1-4](?:-1)?|910_93\d\d)$")
SUPPORTED_SOCS = "Ascend910B1, Ascend910B2, Ascend910B3, Ascend910B4, Ascend910B4-1 (Atlas A2), Ascend910_93xx (Atlas A3)"
MSOPGEN_TYPES = {"float": "float", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64"}
ATTR_TYPES = {"Int": "int", "ListInt": "listInt", "Float": "float", "Bool": "bool"}


def build_info():
    """mx_sparse/runtime/ascend_build_info.py loaded by path (the package itself needs torch to import)."""
    spec = importlib.util.spec_from_file_location("mxs_ascend_build_info", REPO / "mx_sparse" / "runtime" / "ascend_build_info.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kernels/ascend/build.sh",
                                 description="Build and install mx_sparse's AscendC op package and NPU binding.")
    ap.add_argument("--soc", help="target SoC, e.g. Ascend910B2 (default: $MXS_ASCEND_SOC, else `npu-smi info`)")
    ap.add_argument("--build-dir", type=Path, default=REPO / "build" / "ascend_ops",
                    help="where the CANN op project is generated and built (default: build/ascend_ops)")
    ap.add_argument("--install-root", type=Path, default=None,
                    help="op package install root (default: mx_sparse/_ascend_opp inside the package)")
    ap.add_argument("--skip-binding", action="store_true", help="build and install the op package only")
    ap.add_argument("--dry-run", action="store_true", help="check the toolchain and print the steps; run nothing")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    return ap.parse_args(argv)


def soc_from_npu_smi(text: str) -> Optional[str]:
    """The first chip name in `npu-smi info` output (e.g. `910B2` -> Ascend910B2)."""
    m = re.search(r"\b(910B[1-4](?:-1)?|910_93\d\d)\b", text)
    return f"Ascend{m.group(1)}" if m else None


def select_soc(args, env: Mapping[str, str], run_cmd: Callable[[List[str]], Optional[str]]):
    """(soc, "") or (None, why)."""
    soc = args.soc or env.get("MXS_ASCEND_SOC")
    source = "--soc" if args.soc else "MXS_ASCEND_SOC"
    if not soc:
        out = run_cmd(["npu-smi", "info"])
        if out is None:
            return None, ("no SoC given and `npu-smi info` is not available (no NPU driver here): pass --soc "
                          f"(one of {SUPPORTED_SOCS}) or set MXS_ASCEND_SOC")
        soc = soc_from_npu_smi(out)
        source = "npu-smi info"
        if soc is None:
            return None, f"`npu-smi info` shows no supported chip; mx_sparse's kernels target {SUPPORTED_SOCS}"
    if not SOC_PATTERN.match(soc):
        return None, f"SoC {soc} (from {source}) is not supported: mx_sparse's kernels target {SUPPORTED_SOCS}"
    return soc, ""


def soc_config(soc: str) -> str:
    """The OpDef AddConfig name of a SoC."""
    return "ascend910_93" if soc.startswith("Ascend910_93") else "ascend910b"


def find_msopgen(cann, env: Mapping[str, str]) -> Optional[str]:
    on_path = shutil.which("msopgen", path=env.get("PATH"))
    if on_path:
        return on_path
    if cann is not None:
        p = cann.home / "python" / "site-packages" / "bin" / "msopgen"
        if p.is_file():
            return str(p)
    return None


def torch_npu_available() -> bool:
    return importlib.util.find_spec("torch_npu") is not None


@dataclass
class Toolchain:
    cann: object = None
    msopgen: Optional[str] = None
    cmake: Optional[str] = None
    soc: Optional[str] = None
    problems: List[str] = field(default_factory=list)   # each: what is missing -- the exact fix


def detect(args, env: Mapping[str, str] = os.environ, run_cmd=None, torch_npu=None) -> Toolchain:
    info = build_info()
    run_cmd = run_cmd or _run_capture
    tc = Toolchain()
    tc.cann, why = info.find_cann(env)
    if tc.cann is None:
        tc.problems.append(f"CANN toolkit: {why}")
    else:
        v = tc.cann.version_tuple()
        if v is not None and v < info.OLDEST_CANN:
            tc.problems.append(f"CANN {tc.cann.version} at {tc.cann.home} is older than 8.0 -- install CANN >= 8.0 "
                               "(the oldest release whose AscendC API the kernels are checked against)")
        tc.msopgen = find_msopgen(tc.cann, env)
        if tc.msopgen is None:
            tc.problems.append(f"msopgen (CANN's op project generator) not found on PATH or in "
                               f"{tc.cann.home}/python/site-packages/bin -- {info.SOURCE_ENV}")
    tc.cmake = shutil.which("cmake", path=env.get("PATH"))
    if tc.cmake is None:
        tc.problems.append("cmake not found -- pip install cmake (or your distribution's cmake >= 3.16)")
    tc.soc, why = select_soc(args, env, run_cmd)
    if tc.soc is None:
        tc.problems.append(f"SoC: {why}")
    if not args.skip_binding and not (torch_npu_available() if torch_npu is None else torch_npu):
        tc.problems.append("torch_npu is not importable (needed for the binding) -- pip install torch_npu matching "
                           "your torch and CANN, or pass --skip-binding to build the op package only")
    return tc


def _run_capture(cmd: List[str]) -> Optional[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None


def op_description(ops: Dict[str, dict]) -> List[dict]:
    """msopgen's JSON op description, written from the OpDefs (the OpDefs stay the source of truth:
    step 2 replaces the op_host files msopgen generates with ours)."""
    desc = []
    for entry in ops.values():
        op = entry["opdef"]

        def tensors(ts):
            return [{"name": t.name, "param_type": "required", "format": ["ND"] * len(t.dtypes),
                     "type": [MSOPGEN_TYPES[d] for d in t.dtypes]} for t in ts]
        d = {"op": op.op_type, "language": "cpp", "input_desc": tensors(op.inputs), "output_desc": tensors(op.outputs)}
        if op.attrs:
            d["attr"] = [{"name": a.name, "param_type": "required", "type": ATTR_TYPES[a.kind]} for a in op.attrs]
        desc.append(d)
    return desc


def stage_sources(project: Path, ops: Dict[str, dict], cann_version: Optional[str]) -> None:
    """Replace msopgen's generated op_host/op_kernel sources with ours, flat."""
    host, kern = project / "op_host", project / "op_kernel"
    for d in (host, kern):
        for f in d.glob("*"):
            if f.is_file() and f.suffix in (".cpp", ".h"):
                f.unlink()
    # the tiling shares kernels/common's arithmetic (output extent, key deltas) with the CPU kernels
    for f in sorted(ASCEND.glob("*/op_host/*")) + sorted((ASCEND.parent / "common").glob("*.h")):
        if f.suffix in (".cpp", ".h"):
            shutil.copy2(f, host / f.name)
    for f in sorted(ASCEND.glob("*/op_kernel/*")) + sorted((ASCEND / "common" / "op_kernel").glob("*.h")):
        shutil.copy2(f, kern / f.name)
    # the kernels include their tiling structs (and the window gather's) by file name
    for f in sorted(ASCEND.glob("*/op_host/*_tiling_data.h")) + [ASCEND / "common" / "op_host" / "window_gather_tiling.h"]:
        shutil.copy2(f, kern / f.name)
    m = re.match(r"(\d+)\.(\d+)", cann_version or "")
    num = int(m.group(1)) * 100 + int(m.group(2)) if m else 800
    (host / "mxs_cann_version.h").write_text(
        f"// written by kernels/ascend/build_tools/build_ops.py: the CANN release built against\n"
        f"#pragma once\n#define MXS_CANN_VERSION_NUM {num}\n")


def set_vendor(project: Path, cann_home: Path, vendor: str) -> None:
    """vendor_name and the CANN path in the generated CMakePresets.json."""
    presets = project / "CMakePresets.json"
    data = json.loads(presets.read_text())
    for preset in data.get("configurePresets", []):
        cv = preset.get("cacheVariables", {})
        if "vendor_name" in cv:
            cv["vendor_name"]["value"] = vendor
        if "ASCEND_CANN_PACKAGE_PATH" in cv:
            cv["ASCEND_CANN_PACKAGE_PATH"]["value"] = str(cann_home)
    presets.write_text(json.dumps(data, indent=4))


@dataclass
class Step:
    what: str
    cmd: Optional[List[str]] = None      # a command, or
    action: Optional[Callable[[], None]] = None   # a Python action
    cwd: Optional[Path] = None


def plan(args, tc: Toolchain, ops: Dict[str, dict]) -> List[Step]:
    info = build_info()
    build_dir = args.build_dir.resolve()
    project = build_dir / "mx_sparse_ops"
    root = (args.install_root or info.OPP_ROOT).resolve()
    desc = build_dir / "mx_sparse_ops.json"

    def write_desc():
        if project.exists():
            shutil.rmtree(project)
        build_dir.mkdir(parents=True, exist_ok=True)
        desc.write_text(json.dumps(op_description(ops), indent=2))

    steps = [
        Step(f"op description for {len(ops)} ops -> {desc}", action=write_desc),
        Step("generate the CANN op project (msopgen)",
             cmd=[tc.msopgen or "msopgen", "gen", "-i", str(desc), "-c", f"ai_core-{tc.soc}", "-lan", "cpp",
                  "-out", str(project)]),
        Step("stage mx_sparse's op_host / op_kernel sources (flat)",
             action=lambda: stage_sources(project, ops, tc.cann.version if tc.cann else None)),
        Step(f"vendor `{info.VENDOR}` in CMakePresets.json",
             action=lambda: set_vendor(project, tc.cann.home if tc.cann else Path("."), info.VENDOR)),
        Step("build the op package (tiling/proto libraries, kernels, aclnn API)", cmd=["bash", "build.sh"],
             cwd=project),
        Step(f"install the op package into {root}",
             cmd=["bash", "-c", f'set -e; run=$(ls build_out/custom_opp_*.run | head -1); '
                                f'bash "$run" --quiet --install-path="{root}"'], cwd=project),
    ]
    if not args.skip_binding:
        steps.append(Step("build the torch_npu binding (mx_sparse._C_npu)",
                          cmd=[sys.executable, "-m", "pip", "install", "--no-build-isolation", "-e", str(REPO)],
                          cwd=REPO))
    return steps


def main(argv: Optional[Sequence[str]] = None, env: Mapping[str, str] = os.environ, run_cmd=None, out=print,
         torch_npu=None) -> int:
    args = parse_args(argv)
    tc = detect(args, env, run_cmd, torch_npu)
    if tc.cann is not None:
        out(f"CANN {tc.cann.version or '(version unknown)'} at {tc.cann.home} ({tc.cann.layout} layout)")
    if tc.soc:
        out(f"SoC {tc.soc} (op config {soc_config(tc.soc)})")
    if tc.problems:
        out("kernels/ascend/build.sh: cannot build mx_sparse's NPU kernels here:")
        for p in tc.problems:
            out(f"  - {p}")
        return 2
    steps = plan(args, tc, op_sources.discover(ASCEND))
    for i, s in enumerate(steps, 1):
        out(f"[{i}/{len(steps)}] {s.what}" + (f"\n      $ {' '.join(s.cmd)}" if s.cmd else ""))
        if args.dry_run:
            continue
        if s.action:
            s.action()
        else:
            r = subprocess.run(s.cmd, cwd=s.cwd)
            if r.returncode != 0:
                out(f"kernels/ascend/build.sh: step {i} failed (exit {r.returncode}): {s.what}")
                return 1
    out("dry run: nothing was built" if args.dry_run else
        "done -- check with: python -m mx_sparse   (then: bash tests/npu/run_on_atlas.sh)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
