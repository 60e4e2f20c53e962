"""bench/host_cost.py: argument handling, the report's fields and ratios (hand-made figures), and one
real run of the three paths on a tiny KITTI crop (each path in its own interpreter) whose printed
table has every field, the counts the paths must show (the C++ backend launches no Triton kernel,
the CUDA path no emulator kernel and the reverse) and ratios that are the printed times' quotients."""
import re

import pytest

from bench import host_cost


def test_arguments():
    args = host_cost.parse([])
    assert (args.voxels, args.repeats, args.seeds, args.paths, args.child) == (400, 7, 3, ["cpu", "cuda", "npu"], None)
    assert host_cost.parse(["--paths", "cuda, cpu", "--voxels", "50", "--repeats", "3"]).paths == ["cuda", "cpu"]
    for bad in (["--paths", "gpu"], ["--paths", ""], ["--voxels", "0"], ["--repeats", "-1"], ["--voxels", "x"],
                ["--seeds", "0"]):
        with pytest.raises(SystemExit):
            host_cost.parse(bad)


def _figures(path, ms, triton=0, emulator=0, ops=10, reads=0):
    return {"path": path, "voxels": 50, "host_ms": ms, "triton_launches": triton, "emulator_launches": emulator,
            "torch_ops": ops, "host_reads": reads}


def test_report_fields_and_ratios():
    results = {"cpu": _figures("cpu", 4.0), "cuda": _figures("cuda", 10.0, triton=90, ops=150, reads=5),
               "npu": _figures("npu", 3.0, emulator=40, ops=300, reads=8)}
    lines = host_cost.report(results, 7).splitlines()
    assert lines[0].startswith("scene: 50 voxels") and lines[0].endswith("median of 7")
    assert lines[3] == "| C++ CPU backend (whole step, real compute) | 4.00 | 1.00 | 0 | 0 | 10 | 0 |"
    assert lines[4] == "| CUDA path (device work removed) | 10.00 | 2.50 | 90 | 0 | 150 | 5 |"
    assert lines[5] == "| NPU path (device work removed) | 3.00 | 0.75 | 0 | 40 | 300 | 8 |"
    assert lines[-1] == "ratios: cuda=2.50 npu=0.75"
    # without the CPU backend there is nothing to divide by
    assert "ratios" not in host_cost.report({"cuda": results["cuda"]}, 7)
    # the steady state (steps back to back), when every path timed it: its own ratios
    for path, ms in (("cpu", 2.0), ("cuda", 3.0), ("npu", 1.5)):
        results[path]["back_to_back_ms"] = ms
    lines = host_cost.report(results, 7).splitlines()
    at = lines.index("| path | host ms / step | x CPU step |")
    assert lines[at - 1].startswith("back to back")
    assert lines[at + 2:at + 5] == ["| cpu | 2.00 | 1.00 |", "| cuda | 3.00 | 1.50 |", "| npu | 1.50 | 0.75 |"]
    assert lines[-1] == "ratios: cuda=2.50 npu=0.75"
    # where the time goes, per path, when every path timed its phases
    for path, phases in (("cpu", (0.5, 2.0, 1.5)), ("cuda", (4.0, 3.0, 3.0)), ("npu", (1.0, 1.25, 0.75))):
        results[path]["phases_ms"] = dict(zip(host_cost.PHASES, phases))
    lines = host_cost.report(results, 7).splitlines()
    at = lines.index("| path | maps | backward | rest |")
    assert lines[at + 2:at + 5] == ["| cpu | 0.50 | 2.00 | 1.50 |", "| cuda | 4.00 | 3.00 | 3.00 |",
                                    "| npu | 1.00 | 1.25 | 0.75 |"]
    assert lines[-1] == "ratios: cuda=2.50 npu=0.75"
    # and the map phase per layer, a column per path
    for path, us in (("cpu", (45.0, 7.0)), ("cuda", (171.4, 8.0)), ("npu", (146.0, 7.6))):
        results[path]["map_layers_us"] = [("SubMConv3d subm1", us[0]), ("SubMConv3d subm1", us[1])]
    lines = host_cost.report(results, 7).splitlines()
    at = lines.index("| layer | cpu | cuda | npu |")
    assert lines[at + 2:at + 4] == ["| SubMConv3d subm1 | 45 | 171 | 146 |", "| SubMConv3d subm1 | 7 | 8 | 8 |"]
    assert lines[-1] == "ratios: cuda=2.50 npu=0.75"


def test_times_over_seeds_are_medians_and_counts_the_first():
    runs = [dict(_figures("cuda", ms, triton=90), back_to_back_ms=b2b, phases_ms=dict(zip(host_cost.PHASES, phases)),
                 map_layers_us=[["a", layers[0]], ["b", layers[1]]])
            for ms, b2b, phases, layers in ((5.0, 3.0, (1.0, 2.0, 2.0), (10.0, 2.0)), (9.0, 4.0, (3.0, 3.0, 3.0), (30.0, 1.0)),
                                            (6.0, 1.0, (2.0, 1.0, 4.0), (20.0, 3.0)))]
    merged = host_cost.over_seeds(runs)
    assert (merged["host_ms"], merged["back_to_back_ms"], merged["seeds"]) == (6.0, 3.0, 3)
    assert merged["phases_ms"] == dict(zip(host_cost.PHASES, (2.0, 2.0, 3.0)))
    assert merged["map_layers_us"] == [("a", 20.0), ("b", 2.0)]
    assert merged["triton_launches"] == 90 and runs[0]["host_ms"] == 5.0     # the runs are left as they were
    lines = host_cost.report({"cuda": merged}, 7).splitlines()
    assert lines[0].endswith("median of 7, then over 3 interpreters (PYTHONHASHSEED=0..2)")


@pytest.fixture
def emulator_work_removed(monkeypatch):
    """(torch, mx_sparse.runtime.ascend, the _Removed record) with the emulator's launches standing
    for their device work as in bench.host_cost's NPU path; ascend._call put back after the test."""
    torch = pytest.importorskip("torch")
    from mx_sparse.runtime import ascend
    if not ascend.emulator_available():
        pytest.skip("the AscendC emulator needs the kernel sources and a C++ compiler")
    monkeypatch.setattr(ascend, "_call", ascend._call)
    removed = host_cost._Removed()
    host_cost._remove_emulator_device_work(removed)
    return torch, ascend, removed


def test_npu_map_launches_replay_their_recording(emulator_work_removed):
    """The NPU path's map primitives run in the emulator while recording, and copy the recorded
    outputs back afterwards (hand-computed lookups); a step that launches otherwise than the
    recording is an error, not a wrong map."""
    torch, ascend, removed = emulator_work_removed
    query, keys, deltas = torch.tensor([10, 20]), torch.tensor([9, 10, 11, 20]), torch.tensor([-1, 0, 1])
    want = torch.tensor([[0, 1, 2], [-1, 3, -1]], dtype=torch.int32)
    sentinel = torch.iinfo(torch.int64).max
    sorted_keys = torch.tensor([1, 1, 4, sentinel])

    def launches():
        return ascend.sorted_key_lookup(query, keys, deltas, 3, 100), ascend.unique_sorted_keys(sorted_keys)

    found, (unique, count) = launches()
    assert torch.equal(found, want) and count.tolist() == [2] and unique[:2].tolist() == [1, 4]
    assert removed.seconds > 0 and len(removed.recorded) == 2
    removed.replay_from_start()
    emulated = ascend.emulator_stats()
    seconds = removed.seconds
    again, (unique_again, count_again) = launches()
    assert torch.equal(again, want) and torch.equal(unique_again[:2], unique[:2]) and torch.equal(count_again, count)
    assert ascend.emulator_stats() == emulated            # nothing emulated: the recording copied back
    assert removed.seconds > seconds and removed.replayed == 2 and removed.launches == 4   # the copies timed out
    with pytest.raises(RuntimeError, match="the steps differ"):
        ascend.unique_sorted_keys(sorted_keys)          # a third launch: none was recorded
    removed.replay_from_start()
    with pytest.raises(RuntimeError, match="the steps differ"):
        ascend.unique_sorted_keys(sorted_keys)          # recorded first: the lookup


def test_npu_conv_out_keys_recording_is_its_slot_layout(emulator_work_removed):
    """The recorded output of the strided map's key launch is the whole [J * N] slot layout
    (J = 8 slots for k3 s2 with dilation 1, 18 for k(5,3,4) s(4,3,2) d(2,3,1)), and its replay
    gives the keys back."""
    torch, ascend, removed = emulator_work_removed
    ind = torch.tensor([[0, 1, 2, 3], [0, 4, 4, 4], [1, 0, 7, 5]], dtype=torch.int32)
    geometries = [([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], 8), ([5, 3, 4], [4, 3, 2], [2, 1, 1], [2, 3, 1], 18)]

    def launches():
        return [ascend.conv_out_keys(ind, [8, 8, 8], 2, k, s, p, d) for k, s, p, d, _ in geometries]

    first = launches()
    assert [len(v[0]) for _, v in removed.recorded] == [3 * j * 8 for *_, j in geometries]
    assert [t.numel() for t in first] == [3 * j for *_, j in geometries]
    removed.replay_from_start()
    again = launches()
    assert all(torch.equal(a, b) for a, b in zip(first, again)) and removed.replayed == 2


ROW = re.compile(r"\| (?P<name>[^|]+) \| (?P<ms>[\d.]+) \| (?P<ratio>[\d.]+) \| (?P<triton>\d+) \| (?P<emu>\d+) \| "
                 r"(?P<ops>\d+) \| (?P<reads>\d+) \|")


def test_runs_the_cpu_path_in_its_own_interpreter(capsys):
    host_cost.main(["--voxels", "30", "--repeats", "1", "--seeds", "2", "--paths", "cpu"])
    out = capsys.readouterr().out.splitlines()
    cpu = ROW.fullmatch(out[3])
    assert out[0].startswith("scene: 30 voxels") and out[0].endswith("over 2 interpreters (PYTHONHASHSEED=0..1)")
    assert cpu["name"].startswith("C++ CPU backend")
    assert float(cpu["ms"]) > 0 and cpu["ratio"] == "1.00" and int(cpu["ops"]) > 0
    assert int(cpu["triton"]) == int(cpu["emu"]) == int(cpu["reads"]) == 0
    phases = out[out.index("| path | maps | backward | rest |") + 2]
    maps, backward, rest = map(float, phases.split("|")[2:5])
    # every phase took time; the phases of one step add up to it (their medians: to about one step)
    assert phases.startswith("| cpu |") and min(maps, backward, rest) > 0
    assert maps + backward + rest < 3 * float(cpu["ms"])
    # VoxelBackBone8x's 12 convolutions, each its map looked up or built, the first two sharing subm1
    layers = out[out.index("| layer | cpu |") + 2:][:12]
    assert [row.split(" | ")[0] for row in layers[:2]] == ["| SubMConv3d subm1"] * 2
    assert all(re.fullmatch(r"\| \w+ \w+ \| \d+ \|", row) for row in layers)
    steady = out[out.index("| path | host ms / step | x CPU step |") + 2]
    assert re.fullmatch(r"\| cpu \| [\d.]+ \| 1\.00 \|", steady) and float(steady.split("|")[2]) > 0
    assert out[-1] == "ratios: "


@pytest.mark.slow
def test_runs_the_cpu_and_cuda_paths_on_a_tiny_scene(capsys):
    """(~1 minute on a loaded 2-core machine: the interpreter's first kernel runs)"""
    host_cost.main(["--voxels", "30", "--repeats", "1", "--seeds", "1", "--paths", "cpu,cuda"])
    out = capsys.readouterr().out.splitlines()
    rows = {m["name"].split()[0]: m for m in map(ROW.fullmatch, out[3:5])}
    assert set(rows) == {"C++", "CUDA"}
    cpu, cuda = rows["C++"], rows["CUDA"]
    assert int(cpu["triton"]) == int(cpu["emu"]) == int(cpu["reads"]) == 0
    assert int(cuda["triton"]) > 0 and int(cuda["emu"]) == 0 and int(cuda["ops"]) > 0
    assert out[-1] == f"ratios: cuda={float(cuda['ms']) / float(cpu['ms']):.2f}"


@pytest.mark.slow
def test_runs_the_three_paths_on_a_tiny_scene(capsys):
    """(~2 minutes: three interpreters, the NPU emulator's first build included)"""
    host_cost.main(["--voxels", "60", "--repeats", "1", "--seeds", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("scene: 60 voxels")
    rows = {m["name"].split()[0]: m for m in map(ROW.fullmatch, out[3:6])}
    assert set(rows) == {"C++", "CUDA", "NPU"}
    cpu, cuda, npu = rows["C++"], rows["CUDA"], rows["NPU"]
    assert int(cpu["triton"]) == int(cpu["emu"]) == 0 and int(cpu["reads"]) == 0
    assert int(cuda["triton"]) > 0 and int(cuda["emu"]) == 0 and int(cuda["ops"]) > 0
    assert int(npu["emu"]) > 0 and int(npu["triton"]) == 0 and int(npu["ops"]) > 0
    ratios = dict(kv.split("=") for kv in out[-1].removeprefix("ratios: ").split())
    for name, row in (("cuda", cuda), ("npu", npu)):
        assert float(ratios[name]) == pytest.approx(float(row["ms"]) / float(cpu["ms"]), abs=0.02)
