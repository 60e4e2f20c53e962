"""tools/ascend_real_api/installed_cann_check.py: the check of the sources against an INSTALLED CANN.

Here (no CANN) it must skip with the reason; on fake toolkit trees it must find the layout
(8.0-8.5 compiler/tikcpp/tikcfw, 8.5+ <arch>-linux/asc), record the version and name each missing
header. With ASCEND_HOME_PATH set to a real toolkit the full check runs (test at the end)."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "ascend_real_api" / "installed_cann_check.py"


def _tool():
    spec = importlib.util.spec_from_file_location("installed_cann_check", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _touch(p: Path, text=""):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_without_cann_the_check_skips_and_says_why():
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")}
    r = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED" in r.stdout and "ASCEND_HOME_PATH is not set" in r.stdout


def test_tikcpp_layout_version_and_missing_headers_are_reported(tmp_path):
    home = tmp_path / "ascend-toolkit" / "latest"
    _touch(home / "compiler" / "tikcpp" / "tikcfw" / "kernel_operator.h")
    _touch(home / "compiler" / "tikcpp" / "tikcfw" / "lib" / "matmul_intf.h")
    _touch(home / "include" / "tiling" / "platform" / "platform_ascendc.h")
    _touch(home / "ascend_toolkit_install.info", "package_name=Ascend-cann-toolkit\nversion=8.0.0\n")
    lines = []
    res = _tool().run(env={"ASCEND_HOME_PATH": str(home)}, out=lines.append)
    assert res["status"] == "failed" and res["cann_version"] == "8.0.0" and res["layout"] == "tikcpp"
    assert "kernel_operator.h" not in res["missing_headers"]
    assert "tiling/platform/platform_ascendc.h" not in res["missing_headers"]
    assert "register/op_def_registry.h" in res["missing_headers"] and "tikicpulib.h" in res["missing_headers"]
    assert "CANN 8.0.0" in lines[0]
    assert any(l.startswith("FAIL  header register/op_def_registry.h") for l in lines)


def test_asc_layout_of_cann_9_is_found(tmp_path):
    home = tmp_path / "cann-9.0"
    _touch(home / "aarch64-linux" / "asc" / "include" / "kernel_operator.h")
    _touch(home / "aarch64-linux" / "ascend_toolkit_install.info", "version=9.0.RC1\n")
    tool = _tool()
    cann, why = tool._build_info().find_cann({"ASCEND_HOME_PATH": str(home)})
    assert why == "" and cann.layout == "asc" and cann.version == "9.0.RC1" and cann.version_tuple() == (9, 0)


def test_a_tree_without_ascendc_headers_is_not_taken_for_cann(tmp_path):
    cann, why = _tool()._build_info().find_cann({"ASCEND_HOME_PATH": str(tmp_path)})
    assert cann is None and "holds no AscendC headers" in why


@pytest.mark.skipif(not os.environ.get("ASCEND_HOME_PATH"), reason="no installed CANN (ASCEND_HOME_PATH unset)")
def test_sources_type_check_against_the_installed_cann(tmp_path):
    r = subprocess.run([sys.executable, str(TOOL), "-j", "2", "--json", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "all checks passed against CANN" in r.stdout
