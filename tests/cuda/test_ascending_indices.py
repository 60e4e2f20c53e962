"""Builders on index rows a strided builder emitted (issue 32): those rows are distinct, in their grid
and ascending in (batch, *coords) order (built_maps.indices_state), so a submanifold or strided
builder on them skips its key sort and the permutation's work (the lookup's positions are the rows,
kernels/orchestration/neighbor_map_orchestration.cpp). The maps, output rows and kept row keys are
the C++ CPU builders' and the full path's bit for bit; rows no builder vouched for as ascending (a
copy, a submanifold builder's checked input, a tensor written in place) take the full path."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_cases import CPU, CUDA, cpu_is_cuda_path, voxels
from mx_sparse._accelerator import built_maps

pytestmark = cpu_is_cuda_path

SHAPE = [9, 10, 11]
STRIDED = (3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])


class _Sorts(TorchDispatchMode):
    """Counts the aten sorts and index_copy_ calls made inside it."""
    def __init__(self):
        super().__init__()
        self.sorts = self.copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.sorts += name == "sort"
        self.copies += name == "index_copy_"
        return func(*args, **(kwargs or {}))


def _counted(build, *args):
    with _Sorts() as seen:
        result = build(*args)
    return result, seen


def _emitted(seed):
    """Index rows a strided builder emitted (vouched ascending) and their grid."""
    idx = voxels(SHAPE, 3, density=0.3, seed=seed, empty_batches=(1,))
    out_idx, _, out_shape = CUDA["build_conv_map"](idx, SHAPE, *STRIDED)
    assert built_maps.indices_state(out_idx, out_shape, 3) == (True, True)
    return out_idx, list(out_shape)


def _row_key(nbr):
    key = built_maps.row_key(nbr)
    return None if key is None else key.long()


@pytest.mark.parametrize("kernel,dilation", [([3, 3, 3], [1, 1, 1]), ([5, 3, 3], [1, 2, 1]), ([2, 3, 4], [1, 1, 2])])
def test_submanifold_map_on_emitted_rows_skips_the_sort(kernel, dilation):
    out_idx, shape = _emitted(seed=1)
    nbr, seen = _counted(CUDA["build_subm_map"], out_idx, shape, 3, kernel, dilation)
    assert seen.sorts == 0 and seen.copies == 0, "ascending rows: no key sort, no un-permutation"
    assert torch.equal(nbr, CPU.build_subm_map(out_idx, shape, 3, kernel, dilation))
    # the same rows in a fresh tensor (not vouched for): checked, sorted, un-permuted -- the same map and keys
    copy = out_idx.clone()
    full, seen = _counted(CUDA["build_subm_map"], copy, shape, 3, kernel, dilation)
    assert seen.sorts == 1 and seen.copies >= 1
    assert torch.equal(full, nbr) and torch.equal(_row_key(full), _row_key(nbr))
    assert _row_key(nbr) is not None


@pytest.mark.parametrize("geometry", [STRIDED, (3, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]),
                                      (3, [3, 1, 1], [2, 1, 1], [0, 0, 0], [1, 1, 1])])
def test_strided_map_on_emitted_rows_skips_the_input_sort(geometry):
    out_idx, shape = _emitted(seed=2)
    (idx2, nbr, shape2), seen = _counted(CUDA["build_conv_map"], out_idx, shape, *geometry)
    assert seen.sorts == 1, "only the pair keys' sort: the input keys are sorted already"
    want = CPU.build_conv_map(out_idx, shape, *geometry)
    assert torch.equal(idx2, want[0]) and torch.equal(nbr, want[1]) and list(shape2) == list(want[2])
    (full_idx, full, _), seen = _counted(CUDA["build_conv_map"], out_idx.clone(), shape, *geometry)
    assert seen.sorts == 2
    assert torch.equal(full_idx, idx2) and torch.equal(full, nbr) and torch.equal(_row_key(full), _row_key(nbr))
    # its outputs are ascending too: the next builder skips its sort again
    assert built_maps.indices_state(idx2, shape2, 3) == (True, True)
    # the transpose (input gradient's map) and its kept row keys, as on the full path
    assert torch.equal(CUDA["transpose_map"](nbr, out_idx.shape[0]), CPU.transpose_map(nbr, out_idx.shape[0]))
    assert torch.equal(_row_key(CUDA["transpose_map"](nbr, out_idx.shape[0])),
                       _row_key(CUDA["transpose_map"](full, out_idx.shape[0])))


def test_rows_not_vouched_ascending_take_the_full_path():
    """A submanifold builder's checked input (its rows in any order) is checked, not ascending; a
    write in place drops the vouching; a larger batch or grid keeps it, a smaller one does not."""
    idx = voxels(SHAPE, 3, density=0.3, seed=3)
    CUDA["build_subm_map"](idx, SHAPE, 3, [3, 3, 3], [1, 1, 1])
    assert built_maps.indices_state(idx, SHAPE, 3) == (True, False)
    _, seen = _counted(CUDA["build_subm_map"], idx, SHAPE, 3, [3, 3, 3], [1, 1, 1])
    assert seen.sorts == 1
    out_idx, shape = _emitted(seed=4)
    assert built_maps.indices_state(out_idx, [s + 1 for s in shape], 4) == (True, True)
    assert built_maps.indices_state(out_idx, [shape[0] - 1] + shape[1:], 3) == (False, False)
    out_idx[[0, -1]] = out_idx[[-1, 0]]     # no longer ascending: the write drops the vouching
    assert built_maps.indices_state(out_idx, shape, 3) == (False, False)
    nbr, seen = _counted(CUDA["build_subm_map"], out_idx, shape, 3, [3, 3, 3], [1, 1, 1])
    assert seen.sorts == 1
    assert torch.equal(nbr, CPU.build_subm_map(out_idx, shape, 3, [3, 3, 3], [1, 1, 1]))
