"""mx_sparse.runtime.ascend_build_info: the report of `python -m mx_sparse` about CANN / op package / binding,
and the custom-op path set at import, on fake install trees (no CANN here)."""
from pathlib import Path

from mx_sparse.runtime import ascend_build_info as abi


def _installed(tmp_path) -> Path:
    lib = abi.vendor_dir(tmp_path) / "op_api" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcust_opapi.so").write_bytes(b"")
    return tmp_path


def test_vendor_tree_is_prepended_once_when_installed(tmp_path):
    env = {"ASCEND_CUSTOM_OPP_PATH": "/opt/other"}
    assert not abi.point_runtime_at_vendor_tree(env, tmp_path)          # nothing installed: untouched
    assert env == {"ASCEND_CUSTOM_OPP_PATH": "/opt/other"}
    root = _installed(tmp_path)
    assert abi.point_runtime_at_vendor_tree(env, root)
    assert abi.point_runtime_at_vendor_tree(env, root)
    assert env["ASCEND_CUSTOM_OPP_PATH"] == f"{abi.vendor_dir(root)}:/opt/other"


def test_report_names_each_missing_piece_with_its_fix():
    s = {"cann": None, "cann_missing": "ASCEND_HOME_PATH is not set", "torch_npu": False, "op_package": False,
         "vendor_dir": "/x/vendors/mx_sparse", "custom_opp_path": "", "binding": None, "torch_npu_first": False}
    text = "\n".join(abi.report_lines(s))
    assert "CANN        not found: ASCEND_HOME_PATH is not set" in text
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in text
    assert "bash kernels/ascend/build.sh" in text and "pip install torch_npu" in text


def test_report_of_a_complete_install(tmp_path):
    (tmp_path / "compiler" / "tikcpp" / "tikcfw").mkdir(parents=True)
    (tmp_path / "compiler" / "tikcpp" / "tikcfw" / "kernel_operator.h").write_text("")
    (tmp_path / "ascend_toolkit_install.info").write_text("version=8.0.0\n")
    cann, _ = abi.find_cann({"ASCEND_HOME_PATH": str(tmp_path)})
    s = {"cann": cann, "cann_missing": "", "torch_npu": True, "op_package": True,
         "vendor_dir": "/x/vendors/mx_sparse", "custom_opp_path": "/x/vendors/mx_sparse", "binding": "_C_npu.so",
         "torch_npu_first": False}
    text = "\n".join(abi.report_lines(s))
    assert "CANN        8.0.0 at" in text and "includes it" in text and "missing" not in text
    late = "\n".join(abi.report_lines({**s, "torch_npu_first": True}))
    assert "imported before mx_sparse" in late and "export ASCEND_CUSTOM_OPP_PATH=/x/vendors/mx_sparse" in late
