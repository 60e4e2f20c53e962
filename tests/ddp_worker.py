"""One process of test_distributed.py: DistributedDataParallel over gloo with a file://
rendezvous, trains ddp_case on its own sample and saves the recorded parameters.

    python tests/ddp_worker.py RANK WORLD_SIZE INIT_FILE OUT_FILE [check-syncbn]
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_case  # noqa: E402

import mx_sparse  # noqa: E402


def syncbn_refuses_cpu_training():
    """torch's SyncBatchNorm in training mode under an initialised process group refuses CPU
    tensors (the reason the equality test freezes BatchNorm); returns its message."""
    net = torch.nn.SyncBatchNorm.convert_sync_batchnorm(mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 8, 3), torch.nn.BatchNorm1d(8), torch.nn.ReLU())).train()
    features, indices, _ = ddp_case.scene()
    try:
        net(mx_sparse.SparseConvTensor(features.float(), indices, ddp_case.SHAPE, 2))
    except ValueError as e:
        return str(e)
    return None


def main():
    rank, world, init_file, out_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)   # two processes on two cores
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        features, indices, _ = ddp_case.scene()
        features, indices, batch_size = ddp_case.shard(features, indices, rank)
        net = ddp_case.model()
        ddp = DistributedDataParallel(net)
        result = {"recorded": ddp_case.train(ddp, features, indices, batch_size, params=net),
                  "voxels": indices.shape[0]}
        if "check-syncbn" in sys.argv:
            result["syncbn_error"] = syncbn_refuses_cpu_training()
        torch.save(result, out_file)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
