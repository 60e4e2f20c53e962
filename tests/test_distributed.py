"""torch.distributed with mx_sparse models: DistributedDataParallel over gloo in two
processes equals one process on the concatenated batch; SyncBatchNorm conversion of
SparseSequential models; examples/train_ddp.py under torchrun.

Processes are spawned with a timeout each, so a hang fails the test instead of stalling the
suite; rendezvous is a file:// in the test's temporary directory (the example: torchrun
--standalone, a free port on localhost).
"""
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import ddp_case
import mx_sparse
from mx_sparse.models import VoxelBackBone8x

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMEOUT = 300


def run_processes(commands, env=None, drop=(), drop_prefixes=()):
    """Runs the commands at once with this environment plus ``env``, less the variables named in
    ``drop`` or starting with one of ``drop_prefixes``; returns (returncode, stdout, stderr) each."""
    base = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(tuple(drop_prefixes))}
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**base, **(env or {})}) for c in commands]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            outputs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outputs


def assert_close_params(actual, expected, rtol):
    for name, e in expected.items():
        scale = e.abs().max().clamp_min(1e-30)
        diff = ((actual[name] - e).abs().max() / scale).item()
        assert diff <= rtol, (name, diff)


def test_ddp_two_processes_equal_one_process_on_the_concatenated_batch(tmp_path):
    """float64, so the only difference is summation order: each process sums its sample's
    gradient and gloo averages the two, where one process sums both samples in one pass.
    Measured: at most ~1e-15 of each parameter's largest value after 1 and after 3 steps; the
    tolerance 1e-11 is far below any real error (a gradient left out or counted twice changes
    parameters by O(1) of the step)."""
    init = tmp_path / "rendezvous"
    cmds = [[sys.executable, os.path.join(HERE, "ddp_worker.py"), str(r), "2", str(init), str(tmp_path / f"rank{r}.pt")]
            + (["check-syncbn"] if r == 0 else []) for r in range(2)]
    for code, out, err in run_processes(cmds):
        assert code == 0, err[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert ranks[0]["voxels"] > 1000 and ranks[1]["voxels"] > 1000 and ranks[0]["voxels"] != ranks[1]["voxels"]

    features, indices, batch_size = ddp_case.scene()
    single = ddp_case.train(ddp_case.model(), features, indices, batch_size)
    for step in ddp_case.RECORDED_STEPS:
        for name, p in ranks[0]["recorded"][step].items():   # DDP keeps the replicas identical
            assert torch.equal(p, ranks[1]["recorded"][step][name]), (step, name)
        assert_close_params(ranks[0]["recorded"][step], single[step], rtol=1e-11)
    start = ddp_case.model().conv_input[0].weight
    moved = (single[1]["conv_input.0.weight"] - start).abs().max() / start.abs().max()
    assert moved > 0.01   # one step changed the parameters substantially
    assert "SyncBatchNorm expected input tensor to be on GPU" in ranks[0]["syncbn_error"]


def count_fused_calls(monkeypatch):
    calls = []
    real = mx_sparse.nn.modules.batch_norm_relu
    monkeypatch.setattr(mx_sparse.nn.modules, "batch_norm_relu", lambda x, bn: calls.append(bn) or real(x, bn))
    return calls


def test_convert_sync_batchnorm_keeps_structure_and_state():
    torch.manual_seed(0)
    net = VoxelBackBone8x(4)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(VoxelBackBone8x(4))
    converted.load_state_dict(net.state_dict())
    bns = [n for n, m in net.named_modules() if isinstance(m, nn.BatchNorm1d)]
    syncs = [n for n, m in converted.named_modules() if isinstance(m, nn.SyncBatchNorm)]
    assert len(bns) == 12 and syncs == bns                      # every BatchNorm1d, same place
    assert not any(type(m) is nn.BatchNorm1d for m in converted.modules())
    assert list(converted.state_dict()) == list(net.state_dict())  # checkpoints load both ways
    for (n, a), b in zip(net.state_dict().items(), converted.state_dict().values()):
        assert torch.equal(a, b), n
    assert all(isinstance(m, mx_sparse.SparseSequential) for m in (converted.conv1, converted.conv2))


def test_fused_batchnorm_relu_is_bypassed_for_syncbatchnorm_with_equal_results(monkeypatch):
    """SparseSequential fuses only a plain BatchNorm1d + ReLU; a SyncBatchNorm runs as torch's
    module (its statistics are all-reduced on GPU/NPU). In eval mode both compute the same:
    the SyncBatchNorm model equals the fused plain one up to float rounding."""
    torch.manual_seed(0)
    net = VoxelBackBone8x(4).eval()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(VoxelBackBone8x(4)).eval()
    converted.load_state_dict(net.state_dict())
    features, indices, batch_size = ddp_case.scene()
    x = lambda: mx_sparse.SparseConvTensor(features.float(), indices, ddp_case.SHAPE, batch_size)  # noqa: E731
    calls = count_fused_calls(monkeypatch)
    plain = net(x()).features
    assert len(calls) == 12
    calls.clear()
    synced = converted(x()).features
    assert calls == []
    torch.testing.assert_close(synced, plain, rtol=1e-5, atol=1e-5 * plain.abs().max().item())


def test_syncbatchnorm_runs_on_zero_voxels():
    """On zero voxels SparseSequential skips a plain BatchNorm, but not a SyncBatchNorm: in
    training every process must enter its collectives, or the others wait forever."""
    net = nn.SyncBatchNorm.convert_sync_batchnorm(mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 8, 3), nn.BatchNorm1d(8), nn.ReLU(), mx_sparse.SubMConv3d(8, 8, 3),
        nn.BatchNorm1d(8)))
    seen = []
    for m in net.modules():
        if isinstance(m, nn.SyncBatchNorm):
            m.register_forward_pre_hook(lambda mod, args: seen.append(args[0].shape[0]))
    empty = mx_sparse.SparseConvTensor(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.int32), [4, 4, 4], 1)
    assert net(empty).features.shape == (0, 8)
    assert seen == [0, 0]


def test_train_ddp_example_under_torchrun():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(ROOT, "examples", "train_ddp.py"), "--steps", "2", "--scenes", "1", "--crop", "256"]
    # the example as a user runs it, without the switches this test session sets for other tests.
    # (Rank 0 used to print its result and then never exit, more often with TRITON_INTERPRET=1: a
    # gloo worker freeing a collective's Python tensors needed the GIL that the exiting main thread
    # held while joining it; examples/train_ddp.py keeps those collectives alive, _FINISHED_COLLECTIVES.)
    [(code, out, err)] = run_processes([cmd], env={"OMP_NUM_THREADS": "1"}, drop=("TRITON_INTERPRET",),
                                       drop_prefixes=("TORCHINDUCTOR", "_TORCHINDUCTOR"))
    assert code == 0, err[-3000:]
    line = out.strip().splitlines()[-1]
    assert line.startswith("done: 2 steps x 2 processes (gloo, cpu)"), out[-2000:]
    assert "replicas identical" in line
