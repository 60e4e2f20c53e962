"""bench/ascend_host_ops.count_host_ops: operators called from Python are counted, operators nested
inside another operator or inside a paused kernel launch are not; .item() and the named read
functions are host reads (hand-counted cases)."""
import pathlib
import sys
import types

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from bench.ascend_host_ops import count_host_ops  # noqa: E402


def test_counts_python_level_operators_and_reads():
    x = torch.arange(16.0)

    def step():
        y = (x * 2).sum()                              # mul, sum
        y.item()                                       # item (-> _local_scalar_dense: a host read)
        torch.nn.functional.linear(x[None], torch.ones(3, 16))   # unsqueeze (view), ones, linear (addmm nested)
    r = count_host_ops(step)
    assert r["by_op"] == {"aten::mul": 1, "aten::sum": 1, "aten::item": 1, "aten::ones": 1, "aten::linear": 1}
    assert r["torch_ops"] == 5 and r["view_ops"] == 1 and r["host_reads"] == 1


def test_paused_launches_and_read_functions(monkeypatch):
    mod = types.ModuleType("mxs_fake_backend")

    def launch(t):          # a "kernel": its operators are the device's work, not the host's
        return (t + 1).mul_(3).sum()

    def read(t, why):
        return t.tolist()
    mod.launch, mod.read = launch, read
    monkeypatch.setitem(sys.modules, "mxs_fake_backend", mod)
    x = torch.ones(4)

    def step():
        for _ in range(3):
            mod.launch(x)
        mod.read(x.clone(), "sizes")                   # clone: 1 operator; the read itself: 1 host read
    r = count_host_ops(step, pause_in=[("mxs_fake_backend", "launch")], reads_in=[("mxs_fake_backend", "read")])
    assert r["kernel_launches"] == 3 and r["torch_ops"] == 1 and r["by_op"] == {"aten::clone": 1}
    assert r["host_reads"] == 1 and r["reads"] == {"mxs_fake_backend.read": 1}
    assert mod.launch is launch                        # patches undone
