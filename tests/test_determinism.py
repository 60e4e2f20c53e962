"""Forward and backward are bitwise identical across runs and between 1 and 2 threads."""
import torch

import mx_sparse
from mx_sparse.models import SparseUNet, VoxelBackBone8x
from mx_sparse.synthetic import make_batch


def crop(batch, depth=41, height=320, width=320):
    """A sub-volume of a generated KITTI scene, to keep the test quick."""
    idx, feats = batch["indices"], batch["features"]
    y0 = 800 - height // 2  # the sensor sits at y = 800 in the KITTI grid
    keep = (idx[:, 2] >= y0) & (idx[:, 2] < y0 + height) & (idx[:, 3] < width)
    cropped = idx[keep] - torch.tensor([0, 0, y0, 0], dtype=torch.int32)
    return mx_sparse.SparseConvTensor(feats[keep].clone().requires_grad_(), cropped, [depth, height, width],
                                      batch["batch_size"])


def run(model, threads):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        x = crop(make_batch("kitti", batch_size=2, seed=3))
        model.zero_grad(set_to_none=True)
        y = model(x)
        (y.features * torch.linspace(-1, 1, y.features.numel()).reshape(y.features.shape)).sum().backward()
        # BatchNorm1d's own weight/bias gradients come from torch's parallel
        # reductions, which are not thread-count invariant; the sparse conv
        # weights and everything upstream of them must be.
        convs = [m for m in model.modules() if isinstance(m, mx_sparse.SparseConvolution)]
        return [y.features.detach(), x.features.grad] + [m.weight.grad for m in convs]
    finally:
        torch.set_num_threads(previous)


def test_backbone_bitwise_across_threads_and_runs():
    torch.manual_seed(0)
    model = VoxelBackBone8x(4).eval()  # eval: BatchNorm uses fixed statistics
    one, two, again = run(model, 1), run(model, 2), run(model, 2)
    assert one[0].shape[0] > 100 and len(one) == 2 + 12
    for a, b, c in zip(one, two, again):
        assert torch.equal(a, b) and torch.equal(b, c)


def test_unet_with_inverse_convs_bitwise_across_threads():
    torch.manual_seed(0)
    model = SparseUNet(4).eval()
    for a, b in zip(run(model, 1), run(model, 2)):
        assert torch.equal(a, b)
