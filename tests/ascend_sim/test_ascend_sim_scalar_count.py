"""The scalar-block counter (``scalar_blocks`` in ASCEND_SIM_STATS) counts the kernel's own
control flow and nothing of the emulator's implementation of the API calls.

scalar_count_kernel.cpp is built as a kernel translation unit (cpu_debug_build.sh -k):
a per-element scalar loop must cost blocks in proportion to n, while a vector-only kernel must
cost the same blocks for any tile size (the emulator's element loops are not counted) and a
fixed number of blocks per tile."""
import json

from ascend_sim_build import run_bin


def _launch(sim_bins, tmp_path, *args):
    stats = tmp_path / f"stats_{'_'.join(args)}.jsonl"
    proc = run_bin(sim_bins["scalar_count"], list(args), env_extra={"ASCEND_SIM_STATS": str(stats),
                                                                    "ASCEND_SIM_STRICT": "1"})
    assert proc.returncode == 0 and "ALL OK" in proc.stdout, proc.stdout + proc.stderr
    return json.loads(stats.read_text().splitlines()[-1])


def _blocks(rec):
    return rec["total"]["scalar_blocks"]


def test_scalar_loop_blocks_grow_linearly_with_elements(sim_bins, tmp_path):
    ns = [256, 2048, 16384]
    recs = [_launch(sim_bins, tmp_path, "scalar", str(n)) for n in ns]
    for n, rec in zip(ns, recs):
        assert rec["total"]["scalar_ub_get"] == n
    c = [_blocks(r) for r in recs]
    # exactly affine in n (the input pattern takes the branch the same fraction of times for every n)
    assert (c[2] - c[1]) * (ns[1] - ns[0]) == (c[1] - c[0]) * (ns[2] - ns[1])
    per_element = (c[2] - c[1]) / (ns[2] - ns[1])
    assert 1.0 <= per_element <= 6.0, per_element   # loop test + GetValue + data-dependent branch


def test_vector_only_blocks_do_not_grow_with_elements(sim_bins, tmp_path):
    one_tile = [_launch(sim_bins, tmp_path, "vector", str(t), str(t), "1") for t in (64, 512, 4096)]
    elems = [r["total"]["vector_elems"] for r in one_tile]
    assert elems[0] < elems[1] < elems[2]                      # the emulator did 64x more vector work ...
    assert len({_blocks(r) for r in one_tile}) == 1            # ... and the kernel's scalar work is unchanged
    assert 0 < _blocks(one_tile[0]) < 40


def test_vector_only_blocks_grow_with_tiles(sim_bins, tmp_path):
    tiles = [1, 4, 16]
    c = [_blocks(_launch(sim_bins, tmp_path, "vector", str(256 * t), "256", "1")) for t in tiles]
    per_tile = (c[1] - c[0]) / (tiles[1] - tiles[0])
    assert per_tile > 0
    assert c[2] - c[1] == per_tile * (tiles[2] - tiles[1])    # a fixed cost per tile


def test_blocks_are_per_core(sim_bins, tmp_path):
    rec = _launch(sim_bins, tmp_path, "vector", str(256 * 8), "256", "2")
    per_core = [c["scalar_blocks"] for c in rec["cores"]]
    assert len(per_core) == 2 and per_core[0] == per_core[1] > 0   # 4 tiles each, same code path
    assert sum(per_core) == _blocks(rec)
    single = _launch(sim_bins, tmp_path, "vector", str(256 * 4), "256", "1")
    assert per_core[0] == _blocks(single)


def test_harness_translation_units_are_not_counted(sim_bins, tmp_path):
    """Kernels compiled together with their harness (no -k) are not instrumented: 0 blocks."""
    stats = tmp_path / "stats.jsonl"
    proc = run_bin(sim_bins["fid_launch"], env_extra={"ASCEND_SIM_STATS": str(stats)})
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in stats.read_text().splitlines()]
    assert records and all(r["total"]["scalar_blocks"] == 0 for r in records)
