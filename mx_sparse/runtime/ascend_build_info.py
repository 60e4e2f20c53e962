"""Where mx_sparse's Ascend pieces are, and what is missing: the CANN toolkit, the custom-op package
built by ``kernels/ascend/build.sh`` (installed inside this package), the torch_npu binding.

Used by ``python -m mx_sparse`` (``report_lines``), by the build (``kernels/ascend/build.sh`` loads
this file by path: no torch import at module level) and at import time, where
``point_runtime_at_vendor_tree`` puts the package's vendor tree on ``ASCEND_CUSTOM_OPP_PATH``
before torch_npu reads that variable (it reads it once, when torch_npu is imported).
"""
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, MutableMapping, Optional, Tuple

VENDOR = "mx_sparse"
PACKAGE_DIR = Path(__file__).resolve().parent.parent   # mx_sparse/ (this file is mx_sparse/runtime/)
# install root of the op package: <package>/_ascend_opp/vendors/mx_sparse/{op_api,op_impl,op_proto,...}
OPP_ROOT = PACKAGE_DIR / "_ascend_opp"
SOURCE_ENV = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
OLDEST_CANN = (8, 0)   # the oldest CANN the kernels target (the emulator's default, rule J35)
# torch_npu was already imported when mx_sparse pointed the runtime at its vendor tree (too late:
# torch_npu reads ASCEND_CUSTOM_OPP_PATH once, at import; `import torch` may autoload it)
_torch_npu_first = False


@dataclass
class CannInstall:
    home: Path              # ASCEND_HOME_PATH
    layout: str             # "tikcpp" (8.0-8.5: compiler/tikcpp/tikcfw) or "asc" (8.5+/9.x: <arch>-linux/asc)
    kernel_include: Path    # the folder holding kernel_operator.h
    version: Optional[str]  # "8.0.0", "8.5.RC1", ... (None when no version file was found)

    def version_tuple(self) -> Optional[Tuple[int, int]]:
        m = re.match(r"(\d+)\.(\d+)", self.version or "")
        return (int(m.group(1)), int(m.group(2))) if m else None


def read_cann_version(home: Path) -> Optional[str]:
    """The toolkit's version from its install-info files (``version=8.0.0``), top level first."""
    candidates = [home / "ascend_toolkit_install.info", home / "version.cfg", home / "version.info"]
    candidates += sorted(home.glob("*-linux/ascend_toolkit_install.info"))
    candidates += [home / "compiler" / "version.info"]
    for f in candidates:
        if f.is_file():
            m = re.search(r"^\s*(?:version|Version)\s*=\s*([0-9][\w.]*)", f.read_text(errors="replace"), re.M)
            if m:
                return m.group(1)
    return None


def find_cann(env: Mapping[str, str] = os.environ) -> Tuple[Optional[CannInstall], str]:
    """(install, "") or (None, why not) for the toolkit ``ASCEND_HOME_PATH`` points at."""
    home_s = env.get("ASCEND_HOME_PATH") or env.get("ASCEND_TOOLKIT_HOME")
    if not home_s:
        return None, f"ASCEND_HOME_PATH is not set (no CANN environment): {SOURCE_ENV}"
    home = Path(home_s)
    if not home.is_dir():
        return None, f"ASCEND_HOME_PATH={home} is not a directory"
    tikcfw = home / "compiler" / "tikcpp" / "tikcfw"
    if (tikcfw / "kernel_operator.h").is_file():
        return CannInstall(home, "tikcpp", tikcfw, read_cann_version(home)), ""
    for asc in sorted(home.glob("*-linux/asc")):
        for inc in (asc / "include", asc):
            if (inc / "kernel_operator.h").is_file():
                return CannInstall(home, "asc", inc, read_cann_version(home)), ""
    return None, (f"ASCEND_HOME_PATH={home} holds no AscendC headers (looked for compiler/tikcpp/tikcfw/"
                  f"kernel_operator.h, CANN 8.0-8.5, and <arch>-linux/asc/include/kernel_operator.h, CANN 8.5+)")


def vendor_dir(root: Path = OPP_ROOT) -> Path:
    return root / "vendors" / VENDOR


def op_package_installed(root: Path = OPP_ROOT) -> bool:
    return (vendor_dir(root) / "op_api" / "lib" / "libcust_opapi.so").is_file()


def point_runtime_at_vendor_tree(env: MutableMapping[str, str] = os.environ, root: Path = OPP_ROOT) -> bool:
    """Prepend the package's vendor tree to ASCEND_CUSTOM_OPP_PATH (once) when the op package is
    installed; True when it is on the path afterwards."""
    global _torch_npu_first
    if not op_package_installed(root):
        return False
    _torch_npu_first = _torch_npu_first or "torch_npu" in sys.modules
    vd = str(vendor_dir(root))
    parts = [p for p in env.get("ASCEND_CUSTOM_OPP_PATH", "").split(":") if p]
    if vd not in parts:
        env["ASCEND_CUSTOM_OPP_PATH"] = ":".join([vd] + parts)
    return True


def _npu_binding() -> Optional[str]:
    libs = sorted(f.name for f in PACKAGE_DIR.glob("_C_npu*.so"))
    return libs[0] if libs else None


def status(env: Mapping[str, str] = os.environ) -> Dict[str, object]:
    cann, why = find_cann(env)
    return {
        "cann": cann, "cann_missing": why,
        "torch_npu": importlib.util.find_spec("torch_npu") is not None,
        "op_package": op_package_installed(), "vendor_dir": str(vendor_dir()),
        "custom_opp_path": env.get("ASCEND_CUSTOM_OPP_PATH", ""),
        "binding": _npu_binding(), "torch_npu_first": _torch_npu_first,
    }


def report_lines(s: Optional[Dict[str, object]] = None) -> List[str]:
    """What was found, built and loaded, and for each missing piece the exact command that fixes it."""
    s = status() if s is None else s
    out, fix = [], []
    cann = s["cann"]
    if cann:
        old = cann.version_tuple() is not None and cann.version_tuple() < OLDEST_CANN
        out.append(f"CANN        {cann.version or 'version unknown'} at {cann.home} ({cann.layout} layout)"
                   + (" -- older than 8.0, not supported" if old else ""))
    else:
        out.append(f"CANN        not found: {s['cann_missing']}")
        fix.append(SOURCE_ENV)
    out.append(f"torch_npu   {'importable' if s['torch_npu'] else 'not installed'}")
    if not s["torch_npu"]:
        fix.append("pip install torch_npu==<the release matching your torch and CANN>")
    out.append(f"op package  {'installed at ' + s['vendor_dir'] if s['op_package'] else 'not built'}")
    on_path = s["vendor_dir"] in str(s["custom_opp_path"]).split(":")
    if s["op_package"]:
        out.append(f"            ASCEND_CUSTOM_OPP_PATH {'includes it' if on_path else 'does not include it'}")
        if not on_path or s.get("torch_npu_first"):
            out.append("            torch_npu was imported before mx_sparse and read the path without it"
                       if s.get("torch_npu_first") else "")
            fix.append(f"export ASCEND_CUSTOM_OPP_PATH={s['vendor_dir']}:$ASCEND_CUSTOM_OPP_PATH before starting "
                       "Python (torch_npu reads it once, at import; `import torch` may import torch_npu), "
                       "or import mx_sparse first with TORCH_DEVICE_BACKEND_AUTOLOAD=0")
    out = [line for line in out if line]
    out.append(f"binding     {s['binding'] or 'not built'}")
    if not s["op_package"] or not s["binding"]:
        fix.append("bash kernels/ascend/build.sh   (from the mx_sparse source tree, CANN environment sourced)")
    if fix:
        out.append("missing -> run:")
        out += [f"  {f}" for f in dict.fromkeys(fix)]
    return out
