"""kernels/ascend/build.sh (kernels/ascend/build_tools/build_ops.py): everything decidable without CANN --
argument parsing, toolchain detection, SoC selection, the messages without CANN, the msopgen op
description, the flat staging of the sources (compiled here against the emulator), the vendor
patch and the step plan on a fake toolkit."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SH = REPO / "kernels" / "ascend" / "build.sh"
EMULATOR_INCLUDE = REPO / "tools" / "ascend_emulator" / "include"


def _mod():
    spec = importlib.util.spec_from_file_location("build_ops", REPO / "kernels" / "ascend" / "build_tools" / "build_ops.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _clean_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "MXS_ASCEND_SOC", "ASCEND_CUSTOM_OPP_PATH")}


def _fake_cann(tmp_path, version="8.0.0"):
    home = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    (home / "compiler" / "tikcpp" / "tikcfw").mkdir(parents=True)
    (home / "compiler" / "tikcpp" / "tikcfw" / "kernel_operator.h").write_text("")
    (home / "ascend_toolkit_install.info").write_text(f"version={version}\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("msopgen", "cmake"):
        (bindir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bindir / tool).chmod(0o755)
    return home, {"ASCEND_HOME_PATH": str(home), "PATH": str(bindir)}


def test_without_cann_build_sh_fails_clearly():
    r = subprocess.run(["bash", str(BUILD_SH)], capture_output=True, text=True, env=_clean_env(), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cannot build mx_sparse's NPU kernels here" in r.stdout
    assert "ASCEND_HOME_PATH is not set" in r.stdout and "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in r.stdout
    assert "pass --soc" in r.stdout


def test_help_lists_the_options():
    r = subprocess.run(["bash", str(BUILD_SH), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    for opt in ("--soc", "--skip-binding", "--dry-run", "--build-dir", "--install-root"):
        assert opt in r.stdout


def test_unknown_option_is_rejected():
    r = subprocess.run(["bash", str(BUILD_SH), "--sock", "x"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unrecognized arguments" in r.stderr


NPU_SMI = """+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc2                 Version: 24.1.rc2                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| 0     910B2               | OK            | 93.5        36                0    / 0             |
"""


def test_soc_selection_order_and_validation():
    m = _mod()
    a = m.parse_args([])
    assert m.select_soc(a, {}, lambda cmd: NPU_SMI) == ("Ascend910B2", "")
    assert m.select_soc(a, {"MXS_ASCEND_SOC": "Ascend910B4"}, lambda cmd: NPU_SMI)[0] == "Ascend910B4"
    assert m.select_soc(m.parse_args(["--soc", "Ascend910B1"]), {"MXS_ASCEND_SOC": "Ascend910B4"},
                        lambda cmd: NPU_SMI)[0] == "Ascend910B1"
    soc, why = m.select_soc(m.parse_args(["--soc", "Ascend310P3"]), {}, lambda cmd: None)
    assert soc is None and "Ascend310P3 (from --soc) is not supported" in why
    soc, why = m.select_soc(a, {}, lambda cmd: None)
    assert soc is None and "npu-smi info` is not available" in why
    soc, why = m.select_soc(a, {}, lambda cmd: NPU_SMI.replace("910B2", "310P3"))
    assert soc is None and "no supported chip" in why
    assert m.soc_config("Ascend910B2") == "ascend910b" and m.soc_config("Ascend910_9391") == "ascend910_93"


def test_toolchain_detection_on_a_fake_toolkit(tmp_path):
    m = _mod()
    _, env = _fake_cann(tmp_path)
    tc = m.detect(m.parse_args(["--soc", "Ascend910B2"]), env, lambda cmd: None, torch_npu=True)
    assert tc.problems == [] and tc.cann.version == "8.0.0" and tc.msopgen.endswith("bin/msopgen")
    _, old = _fake_cann(tmp_path / "old", version="7.0.0")
    tc = m.detect(m.parse_args(["--soc", "Ascend910B2"]), old, lambda cmd: None, torch_npu=False)
    assert any("older than 8.0" in p for p in tc.problems)
    assert any("torch_npu is not importable" in p for p in tc.problems)
    tc = m.detect(m.parse_args(["--soc", "Ascend910B2", "--skip-binding"]), old, lambda cmd: None, torch_npu=False)
    assert not any("torch_npu" in p for p in tc.problems)
    no_tools = {**env, "PATH": str(tmp_path / "empty")}
    tc = m.detect(m.parse_args(["--soc", "Ascend910B2"]), no_tools, lambda cmd: None, torch_npu=True)
    assert any(p.startswith("msopgen") for p in tc.problems) and any(p.startswith("cmake") for p in tc.problems)


def test_dry_run_plans_the_documented_steps(tmp_path):
    m = _mod()
    _, env = _fake_cann(tmp_path)
    lines = []
    rc = m.main(["--soc", "Ascend910B2", "--dry-run", "--build-dir", str(tmp_path / "b"),
                 "--install-root", str(tmp_path / "opp")], env=env, run_cmd=lambda c: None, out=lines.append,
                torch_npu=True)
    text = "\n".join(lines)
    assert rc == 0, text
    assert "CANN 8.0.0" in text and "SoC Ascend910B2 (op config ascend910b)" in text
    assert "gen -i" in text and "-c ai_core-Ascend910B2 -lan cpp" in text
    assert f'--install-path="{(tmp_path / "opp").resolve()}"' in text
    assert "pip install --no-build-isolation -e" in text and "dry run: nothing was built" in text
    assert not (tmp_path / "b").exists()   # nothing ran


def test_op_description_mirrors_the_opdefs():
    m = _mod()
    desc = {d["op"]: d for d in m.op_description(m.op_sources.discover(REPO / "kernels" / "ascend"))}
    assert set(desc) == {"SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm", "GatherMmBackpropFilter"}
    assert [a["name"] for a in desc["SubmMap"]["attr"]] == ["group_size", "key_bound"]
    assert desc["ConvOutKeys"]["attr"][0] == {"name": "spatial_shape", "param_type": "required", "type": "listInt"}
    assert desc["GatherMm"]["input_desc"][0]["type"] == ["float", "float16", "bfloat16"]
    assert desc["GatherMm"]["input_desc"][2]["type"] == ["int32"] * 3
    assert [o["name"] for o in desc["UniqueSortedKeys"]["output_desc"]] == ["ukeys", "count"]


def test_staged_flat_sources_compile(tmp_path):
    """The kernels as CANN's build sees them -- every source in one flat op_kernel folder -- compile
    (against the emulator's AscendC headers; include paths by file name only)."""
    m = _mod()
    project = tmp_path / "proj"
    (project / "op_host").mkdir(parents=True)
    (project / "op_kernel").mkdir()
    (project / "op_kernel" / "generated_stub.cpp").write_text("#error stub\n")
    m.stage_sources(project, m.op_sources.discover(REPO / "kernels" / "ascend"), "8.5.0")
    assert not (project / "op_kernel" / "generated_stub.cpp").exists()
    assert "#define MXS_CANN_VERSION_NUM 805" in (project / "op_host" / "mxs_cann_version.h").read_text()
    kernels = sorted((project / "op_kernel").glob("*.cpp"))
    assert {k.stem for k in kernels} == {"subm_map", "conv_out_keys", "unique_sorted_keys", "gather_mm",
                                         "gather_mm_backprop_filter"}
    for k in kernels:
        r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-I{EMULATOR_INCLUDE}", f"-I{project / 'op_kernel'}",
                            str(k)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{k.name}:\n{r.stderr[-3000:]}"
    for t in sorted((project / "op_host").glob("*_tiling.cpp")):
        # kernel_tiling/kernel_tiling.h (TCubeTiling) is CANN's; the emulator's copy stands in here
        r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-I{project / 'op_host'}", f"-I{EMULATOR_INCLUDE}",
                            str(t)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{t.name}:\n{r.stderr[-3000:]}"


def test_vendor_name_is_patched_into_the_presets(tmp_path):
    m = _mod()
    (tmp_path / "CMakePresets.json").write_text(json.dumps({"configurePresets": [{"name": "default", "cacheVariables": {
        "vendor_name": {"type": "STRING", "value": "customize"},
        "ASCEND_CANN_PACKAGE_PATH": {"type": "PATH", "value": "/usr/local/Ascend/latest"}}}]}))
    m.set_vendor(tmp_path, Path("/opt/cann"), "mx_sparse")
    cv = json.loads((tmp_path / "CMakePresets.json").read_text())["configurePresets"][0]["cacheVariables"]
    assert cv["vendor_name"]["value"] == "mx_sparse" and cv["ASCEND_CANN_PACKAGE_PATH"]["value"] == "/opt/cann"
