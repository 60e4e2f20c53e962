"""pytest fixture for the AscendC emulator tests (helpers live in ascend_sim_build.py so
that the module name cannot collide with other conftest/helper modules of the repo)."""
import pytest

from ascend_sim_build import build_all


@pytest.fixture(scope="session")
def sim_bins():
    return build_all()
