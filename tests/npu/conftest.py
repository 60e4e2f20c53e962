"""tests/npu: op tests on `npu` tensors against the CPU backend. Every test is skipped unless torch_npu
is importable and an NPU is visible (run them with bash tests/npu/run_on_atlas.sh on an Atlas A2)."""
import pytest


def npu_available():
    try:
        import torch
        import torch_npu  # noqa: F401
        return torch.npu.is_available() and torch.npu.device_count() > 0
    except Exception:  # noqa: BLE001 - any import/driver failure means "no NPU here"
        return False


def pytest_collection_modifyitems(config, items):
    if npu_available():
        return
    skip = pytest.mark.skip(reason="no NPU: torch_npu not importable or no device visible")
    for item in items:
        if "tests/npu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
