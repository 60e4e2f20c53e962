"""The bad calls of the error-parity test (tests/test_error_parity.py): each op's argument checks,
map values, index values and dtypes, sent to torch.ops.mx_sparse as a user would. (Devices: this
machine has no second device; a CPU tensor with a meta one is accepted, as torch.mm accepts it.) Run as a
script, it makes every call in this process (whichever backend serves CPU tensors here: the C++
kernels, MXS_CUDA_ON_CPU=1 or MXS_NPU_ON_CPU=1) and prints {case: "ExceptionType: message"} as JSON
("returned" when a call did not raise)."""
import json
import sys

import torch

OPS = torch.ops.mx_sparse
I32, F32 = torch.int32, torch.float32

# The NPU's own refusals (its kernels take no float64; its strided map builder computes in float32,
# exact below 2^24): the cases where the NPU path refuses what the others compute, by design.
NPU_OWN_REFUSALS = {"gather_mm: float64 (the NPU has no float64 kernels)",
                    "build_conv_map: a coordinate of 2^24 (the NPU's strided map takes coordinates < 2^24)",
                    "build_conv_map: pads 2^31 - 1 apart at stride 2 (the NPU's strided map takes extent + padding "
                    "< 2^24)"}


def idx(rows):
    return torch.tensor(rows, dtype=I32)


IDX = idx([[0, 0, 0, 0], [0, 1, 1, 1], [0, 2, 2, 2]])        # 3 voxels in a [4, 4, 4] grid, batch 1
GRID = [4, 4, 4]
K3 = [3, 3, 3]
ONES, ZEROS = [1, 1, 1], [0, 0, 0]


def feats(n=3, c=4, dtype=F32):
    return torch.arange(n * c, dtype=dtype).reshape(n, c) / 7


def nbr(values):
    return torch.tensor(values, dtype=I32)


NBR = nbr([[0, 1], [1, 2], [2, -1]])       # 3 output rows, 2 offsets, input rows of a 3-row tensor
W = torch.ones(2, 4, 5)                     # [K, Cin, Cout]


def bn_args(**change):
    args = dict(input=feats(), weight=torch.ones(4), bias=torch.zeros(4), running_mean=torch.zeros(4),
                running_var=torch.ones(4), batch_stats=True, momentum=0.1, eps=1e-5)
    args.update(change)
    return list(args.values())


def bn_backward_args(**change):
    args = dict(grad=feats(), input=feats(), mean=torch.zeros(4, dtype=torch.float64),
                invstd=torch.ones(4, dtype=torch.float64), weight=torch.ones(4), scale=torch.ones(4),
                shift=torch.zeros(4), batch_stats=True)
    args.update(change)
    return list(args.values())


# name -> (op, argument builder); the arguments are built in the process that makes the call
CASES = {
    # gather_mm: map values, shapes, dtypes, devices
    "gather_mm: map entry = num_rows": ("gather_mm", lambda: [feats(), W, nbr([[0, 1], [1, 3], [2, -1]]), None, 1]),
    "gather_mm: map entry < -1": ("gather_mm", lambda: [feats(), W, nbr([[0, 1], [1, 2], [-2, -1]]), None, 1]),
    "gather_mm: features 1-D": ("gather_mm", lambda: [torch.ones(3), W, NBR, None, 1]),
    "gather_mm: features int32": ("gather_mm", lambda: [feats().to(I32), W.to(I32), NBR, None, 1]),
    "gather_mm: weight float64, features float32": ("gather_mm", lambda: [feats(), W.double(), NBR, None, 1]),
    "gather_mm: weight K != map columns": ("gather_mm", lambda: [feats(), torch.ones(3, 4, 5), NBR, None, 1]),
    "gather_mm: weight Cin != features C": ("gather_mm", lambda: [feats(), torch.ones(2, 3, 5), NBR, None, 1]),
    "gather_mm: map int64": ("gather_mm", lambda: [feats(), W, NBR.long(), None, 1]),
    "gather_mm: map 1-D": ("gather_mm", lambda: [feats(), W, NBR.flatten(), None, 1]),
    "gather_mm: groups 0": ("gather_mm", lambda: [feats(), W, NBR, None, 0]),
    "gather_mm: groups 3 (Cin 4)": ("gather_mm", lambda: [feats(), torch.ones(2, 1, 6), NBR, None, 3]),
    "gather_mm: nbr_t of other width": ("gather_mm", lambda: [feats(), W, NBR, nbr([[0], [1], [2]]), 1]),
    "gather_mm: float64 (the NPU has no float64 kernels)": (
        "gather_mm", lambda: [feats(dtype=torch.float64), W.double(), NBR, None, 1]),
    # its backprop-filter
    "backprop_filter: map entry = num_rows": (
        "gather_mm_backprop_filter", lambda: [feats(), torch.ones(3, 5), nbr([[0, 1], [1, 3], [2, -1]]), None, 1]),
    "backprop_filter: grad rows != map rows": (
        "gather_mm_backprop_filter", lambda: [feats(), torch.ones(2, 5), NBR, None, 1]),
    "backprop_filter: grad float64": (
        "gather_mm_backprop_filter", lambda: [feats(), torch.ones(3, 5, dtype=torch.float64), NBR, None, 1]),
    "backprop_filter: groups 0": ("gather_mm_backprop_filter", lambda: [feats(), torch.ones(3, 5), NBR, None, 0]),
    # map builders: geometry, index dtype / shape / values
    "build_subm_map: indices int64": ("build_subm_map", lambda: [IDX.long(), GRID, 1, K3, ONES]),
    "build_subm_map: indices float32": ("build_subm_map", lambda: [IDX.float(), GRID, 1, K3, ONES]),
    "build_subm_map: indices of 3 columns": ("build_subm_map", lambda: [IDX[:, :3], GRID, 1, K3, ONES]),
    "build_subm_map: row outside the grid": ("build_subm_map", lambda: [idx([[0, 0, 0, 0], [0, 4, 0, 0]]), GRID, 1,
                                                                        K3, ONES]),
    "build_subm_map: negative coordinate": ("build_subm_map", lambda: [idx([[0, 0, -1, 0]]), GRID, 1, K3, ONES]),
    "build_subm_map: batch index = batch_size": ("build_subm_map", lambda: [idx([[1, 0, 0, 0]]), GRID, 1, K3, ONES]),
    "build_subm_map: duplicate voxel": ("build_subm_map", lambda: [idx([[0, 1, 1, 1], [0, 2, 2, 2], [0, 1, 1, 1]]),
                                                                   GRID, 1, K3, ONES]),
    "build_subm_map: batch_size 0": ("build_subm_map", lambda: [IDX, GRID, 0, K3, ONES]),
    "build_subm_map: spatial_shape with 0": ("build_subm_map", lambda: [IDX, [4, 0, 4], 1, K3, ONES]),
    "build_subm_map: dilation 0": ("build_subm_map", lambda: [IDX, GRID, 1, K3, [1, 0, 1]]),
    "build_subm_map: kernel_size of 2 axes": ("build_subm_map", lambda: [IDX, GRID, 1, [3, 3], ONES]),
    "build_conv_map: a coordinate of 2^24 (the NPU's strided map takes coordinates < 2^24)": (
        "build_conv_map", lambda: [idx([[0, 0, 0, 2 ** 24]]), [1, 1, 2 ** 24 + 1], 1, ONES, ONES, ZEROS, ONES]),
    # valid (the output grid fits int32); the grid the accelerator builder grows for the asymmetric
    # padding does not, and the CPU and CUDA paths compute it
    "build_conv_map: pads 2^31 - 1 apart at stride 2 (the NPU's strided map takes extent + padding < 2^24)": (
        "build_conv_map", lambda: [idx([[0, 0, 0, 0], [0, 0, 0, 2]]), [1, 1, 3], 1, [1, 1, 3], [1, 1, 2],
                                   [0, 0, 2 ** 31 - 1], ONES, ZEROS]),
    "build_conv_map: stride 0": ("build_conv_map", lambda: [IDX, GRID, 1, K3, [2, 0, 2], ZEROS, ONES]),
    "build_conv_map: negative padding": ("build_conv_map", lambda: [IDX, GRID, 1, K3, [2, 2, 2], [0, -1, 0], ONES]),
    "build_conv_map: row outside the grid": ("build_conv_map", lambda: [idx([[0, 0, 0, 4]]), GRID, 1, K3, [2, 2, 2],
                                                                        ZEROS, ONES]),
    "build_conv_map: duplicate voxel": ("build_conv_map", lambda: [idx([[0, 1, 1, 1], [0, 1, 1, 1]]), GRID, 1, K3,
                                                                   [2, 2, 2], ZEROS, ONES]),
    "build_conv_map: empty output": ("build_conv_map", lambda: [IDX, [2, 2, 2], 1, [5, 5, 5], [1, 1, 1], ZEROS,
                                                                ONES]),
    "build_conv_transpose_map: output_padding >= stride": (
        "build_conv_transpose_map", lambda: [IDX, GRID, 1, K3, [2, 2, 2], ZEROS, ZEROS, ONES, [2, 0, 0]]),
    "build_conv_transpose_map: row outside the grid": (
        "build_conv_transpose_map", lambda: [idx([[0, 9, 0, 0]]), GRID, 1, K3, [2, 2, 2], ZEROS, ZEROS, ONES, ZEROS]),
    "build_conv_map_at: out_indices outside": (
        "build_conv_map_at", lambda: [IDX, idx([[0, 7, 0, 0]]), GRID, 1, K3, ONES, [1, 1, 1], ONES]),
    "build_conv_map_at: out_indices int64": (
        "build_conv_map_at", lambda: [IDX, idx([[0, 1, 1, 1]]).long(), GRID, 1, K3, ONES, [1, 1, 1], ONES]),
    "build_conv_map_at: duplicate out_indices": (
        "build_conv_map_at", lambda: [IDX, idx([[0, 1, 1, 1], [0, 1, 1, 1]]), GRID, 1, K3, ONES, [1, 1, 1], ONES]),
    # map utilities
    "transpose_map: entry = num_rows": ("transpose_map", lambda: [nbr([[0, 1], [1, 3]]), 3]),
    "transpose_map: map float32": ("transpose_map", lambda: [NBR.float(), 3]),
    "pack_map: map int64": ("pack_map", lambda: [NBR.long()]),
    "unpack_map: kvol 0": ("unpack_map", lambda: [*OPS.pack_map(NBR), 0]),
    # fused BatchNorm+ReLU
    "batch_norm_relu_forward: input 1-D": ("batch_norm_relu_forward", lambda: bn_args(input=torch.ones(4))),
    "batch_norm_relu_forward: input int32": ("batch_norm_relu_forward", lambda: bn_args(input=feats().to(I32))),
    "batch_norm_relu_forward: weight of 3": ("batch_norm_relu_forward", lambda: bn_args(weight=torch.ones(3))),
    "batch_norm_relu_forward: no rows": ("batch_norm_relu_forward", lambda: bn_args(input=torch.ones(0, 4))),
    "batch_norm_relu_forward: running stats missing": (
        "batch_norm_relu_forward", lambda: bn_args(running_mean=None, running_var=None, batch_stats=False)),
    "scale_shift_relu: scale of 3": ("scale_shift_relu", lambda: [feats(), torch.ones(3), torch.zeros(4)]),
    "scale_shift_relu: input 3-D": ("scale_shift_relu", lambda: [torch.ones(1, 3, 4), torch.ones(4), torch.zeros(4)]),
    "batch_norm_relu_backward: grad of other shape": (
        "batch_norm_relu_backward", lambda: bn_backward_args(grad=torch.ones(2, 4))),
    "batch_norm_relu_backward: mean of 3": (
        "batch_norm_relu_backward", lambda: bn_backward_args(mean=torch.zeros(3, dtype=torch.float64))),
    # pooling
    "sparse_max_pool: map entry = num_rows": ("sparse_max_pool", lambda: [feats(), nbr([[0, 1], [1, 3]])]),
    "sparse_max_pool: features int32": ("sparse_max_pool", lambda: [feats().to(I32), NBR]),
    "sparse_max_pool: map int64": ("sparse_max_pool", lambda: [feats(), NBR.long()]),
    "sparse_max_pool_backward: argmax of other shape": (
        "sparse_max_pool_backward", lambda: [torch.ones(3, 4), torch.zeros(2, 4, dtype=torch.long), NBR, 3]),
    # a features tensor without dimensions has no rows to count (the autograd node's num_rows)
    "sparse_avg_pool: features without dimensions": ("sparse_avg_pool", lambda: [torch.tensor(1.0), NBR]),
    "sparse_max_pool: features without dimensions": ("sparse_max_pool", lambda: [torch.tensor(1.0), NBR]),
    "sparse_avg_pool: map entry < -1": ("sparse_avg_pool", lambda: [feats(), nbr([[0, -2], [1, 2]])]),
    "sparse_avg_pool_backward: grad rows != map rows": ("sparse_avg_pool_backward", lambda: [torch.ones(2, 4), NBR,
                                                                                             3]),
    # voxelization
    "voxelize_dynamic: voxel_size 0": ("voxelize_dynamic", lambda: [torch.rand(5, 3), None, [0.1, 0.0, 0.1],
                                                                    [0, 0, 0, 1, 1, 1]]),
    "voxelize_dynamic: points 1-D": ("voxelize_dynamic", lambda: [torch.rand(5), None, [0.1, 0.1, 0.1],
                                                                  [0, 0, 0, 1, 1, 1]]),
    "voxelize_dynamic: range reversed": ("voxelize_dynamic", lambda: [torch.rand(5, 3), None, [0.1, 0.1, 0.1],
                                                                      [0, 0, 0, 1, -1, 1]]),
    "voxelize_hard: max_points 0": ("voxelize_hard", lambda: [torch.rand(5, 3), None, [0.1, 0.1, 0.1],
                                                              [0, 0, 0, 1, 1, 1], 0, 10]),
}


def outcome(op, build):
    try:
        getattr(OPS, op)(*build())
    except Exception as e:  # noqa: BLE001  (the outcome under test is the exception itself)
        return f"{type(e).__name__}: {e}"
    return "returned"


def main():
    json.dump({name: outcome(op, build) for name, (op, build) in CASES.items()}, sys.stdout)


if __name__ == "__main__":
    import mx_sparse  # noqa: F401  (registers the ops)
    main()
