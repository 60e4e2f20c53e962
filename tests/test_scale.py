"""Scale (slow, ~10 min on two cores): forward + backward of VoxelResBackBone8x on a
nuScenes-like batch of 8 with more than 2,000,000 voxels fits this 24 GiB machine, and the same
voxels in a grid 64 times larger take the same memory (nothing is allocated per grid cell).
``python -m bench.scale`` prints the same figures."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import scale  # noqa: E402


@pytest.mark.slow
def test_two_million_voxels_forward_backward_and_grid_independence():
    scale.load_input(2_000_000, 8)
    small, large = (scale.run_child(2_000_000, 8, f, threads=2) for f in (1, 8))
    print(small, large)
    assert small["voxels"] >= 2_000_000 and small["batch_size"] == 8
    assert small["weight_grad_finite"] and large["weight_grad_finite"]
    assert small["peak_rss_gib"] < 20          # with room to spare on 24 GiB
    assert large["grid_cells"] == 64 * small["grid_cells"]
    assert abs(large["peak_extra_gib"] / small["peak_extra_gib"] - 1) < 0.05
