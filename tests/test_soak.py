"""Soak (slow): 1,000 training steps with a new voxel count at every step hold steady:
resident memory of the last 100 steps within bench/soak.py's bound of the first 100 after
warm-up, and no growth of the held-map and fused-BatchNorm registries, the indice_dict or the
CPU pool's statistics. The same run at full size: ``python -m bench.soak``."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import soak  # noqa: E402


@pytest.mark.slow
def test_thousand_steps_hold_steady():
    records, summary = soak.soak(steps=1000, crop=96, log_every=0)
    print(summary)
    assert summary["voxels"][1] > summary["voxels"][0] and summary["voxels"][0] > 1000
    assert len({r["voxels"] for r in records}) > 500           # a new voxel count at most steps
    assert summary["rss_growth_mb"] <= soak.RSS_BOUND_MB, summary
    assert all(v <= 0 for v in summary["growth"].values()), summary
    assert summary["max_in_last_window"]["holders"] == 0 and summary["max_in_last_window"]["recipes"] == 0
