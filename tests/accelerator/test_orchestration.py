"""The accelerator orchestration (mx_sparse/_accelerator: the code CUDA and NPU tensors run), executed
here on CPU tensors with the torch-operator fallback primitives (mx_sparse/_accelerator/fallback.py,
what the dispatcher gives CPU tensors for the five primitives): the same maps bit for bit and the
same ValueErrors as the C++ CPU backend, the primitives against hand-written references, and the
per-group loop of the gathers against the CPU backend's grouped kernels."""
import pytest
import torch

import mx_sparse  # noqa: F401  (registers the ops)
from mx_sparse._accelerator import fallback, registration

OPS = torch.ops.mx_sparse
ACC = registration.ORCHESTRATION
INT64_MAX = torch.iinfo(torch.int64).max

pytestmark = pytest.mark.skipif(registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested(),
                                reason="the CPU ops are the orchestration itself there: nothing to compare it with")


def error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def voxels(shape, batch, n, seed):
    g = torch.Generator().manual_seed(seed)
    cells = torch.randperm(batch * shape[0] * shape[1] * shape[2], generator=g)[:n]
    rows = []
    for dim in reversed(shape):
        rows.append(cells % dim)
        cells = cells // dim
    return torch.stack([cells] + rows[::-1], 1).int()


# ---- the primitives' fallbacks against hand-written references

def test_sorted_key_lookup_finds_each_shifted_key():
    keys = torch.tensor([2, 5, 9, 10, 40], dtype=torch.int64)
    query = torch.tensor([5, 9, 0], dtype=torch.int64)
    deltas = torch.tensor([-3, 0, 1, 31], dtype=torch.int64)
    got = OPS._sorted_key_lookup(query, keys, deltas, 2, 64)
    want = [[0, 1, -1, -1],     # 5-3=2 at 0, 5 at 1, 6 absent, 36 absent
            [-1, 2, 3, 4],      # 6 absent, 9 at 2, 10 at 3, 40 at 4
            [-1, -1, -1, -1]]   # -3, 0, 1, 31 absent
    assert got.dtype == torch.int32 and got.tolist() == want
    assert OPS._sorted_key_lookup(query, keys[:0], deltas, 2, 0).tolist() == [[-1] * 4] * 3
    assert OPS._sorted_key_lookup(query[:0], keys, deltas, 2, 0).shape == (0, 4)


def test_conv_out_keys_hand_computed_1d():
    # 1-D grid of 7, kernel 3, stride 2, padding 1: out extent 4; input i reaches o = (i + 1 - kp) / 2
    # through the kernel positions kp with i + 1 - kp even: two slots (kp = (i + 1) % 2, then + 2)
    idx = torch.tensor([[0, 0], [1, 3], [0, 6]], dtype=torch.int32)
    got = OPS._conv_out_keys(idx, [7], 2, [3], [2], [1], [1]).view(2, 3)   # [slots, N]
    m = INT64_MAX
    want = [[0, 4 + 2, 3],     # slot 0: i=0 kp=1 -> 0; i=3 kp=0 -> 2 (batch 1: 4 + 2); i=6 kp=1 -> 3
            [m, 4 + 1, m]]     # slot 1: i=0 kp=3 no; i=3 kp=2 -> 1; i=6 kp=3 no
    assert got.tolist() == want


def lattice_pairs_reference(idx, shape, kernel, stride, padding, dilation):
    """_conv_out_keys by enumeration, in Python integers: per axis the kernel positions kp in
    [0, k) with i + p - kp*d divisible by s, ascending, slot j the j-th of them; slots row-major
    (J_d = ceil(k / (s / gcd(s, d))) per axis), keys row-major on the output grid."""
    import itertools
    import math
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in zip(shape, kernel, stride, padding, dilation)]
    slots = [-(-k // (s // math.gcd(s, d))) for k, s, d in zip(kernel, stride, dilation)]
    keys = []
    for js in itertools.product(*[range(j) for j in slots]):
        for b, *coords in idx.tolist():
            key = b
            for i, j, k, s, p, d, o_extent in zip(coords, js, kernel, stride, padding, dilation, out):
                lattice = [kp for kp in range(k) if (i + p - kp * d) % s == 0]
                o = (i + p - lattice[j] * d) // s if j < len(lattice) else -1
                if not 0 <= o < o_extent:
                    key = INT64_MAX
                    break
                key = key * o_extent + o
            keys.append(key)
    return torch.tensor(keys, dtype=torch.int64)


@pytest.mark.parametrize("shape,kernel,stride,padding,dilation", [
    ([9, 10, 11], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]),     # 2 slots per axis
    ([9, 10, 11], [3, 1, 1], [2, 1, 1], [0, 0, 0], [1, 1, 1]),     # VoxelBackBone8x's last conv
    ([8, 9, 7], [2, 2, 2], [2, 2, 2], [1, 0, 1], [1, 1, 1]),       # one slot per axis
    ([12, 9, 8], [5, 3, 4], [4, 3, 2], [2, 1, 2], [2, 3, 1]),      # gcd(s, d) 2 and 3: classes empty for odd i+p
    ([6, 7, 5], [3, 3, 3], [1, 1, 1], [1, 0, 2], [1, 2, 1]),       # stride 1: slot j is offset j
    ([20, 6, 6], [5, 2, 3], [3, 2, 3], [3, 1, 0], [2, 1, 2]),      # inverse of d/gcd modulo the step (2 mod 3)
], ids=["k3s2", "k311s211", "k2s2", "gcd", "stride1", "inverse"])
def test_conv_out_keys_against_an_enumeration(shape, kernel, stride, padding, dilation):
    """Every (offset, input) pair with an output exactly once, in the slot layout, against the pairs
    enumerated one kernel position at a time; a different rule (not the residue arithmetic)."""
    idx = voxels(shape, 2, 70, seed=sum(kernel))
    got = OPS._conv_out_keys(idx, shape, 2, kernel, stride, padding, dilation)
    assert torch.equal(got, lattice_pairs_reference(idx, shape, kernel, stride, padding, dilation))
    # the distinct keys are the CPU backend's output voxels
    out_idx, _ = mx_sparse.functional.build_conv_map(idx, shape, 2, kernel, stride, padding, dilation)
    keys = torch.unique(got[got != INT64_MAX])
    assert keys.numel() == out_idx.shape[0]


def test_unique_sorted_keys_compacts_and_counts_without_sentinels():
    keys = torch.tensor([1, 1, 4, 7, 7, 7, 9, INT64_MAX, INT64_MAX], dtype=torch.int64)
    unique, count = OPS._unique_sorted_keys(keys)
    assert count.dtype == torch.int32 and count.tolist() == [4]
    assert unique.shape == keys.shape and unique[:4].tolist() == [1, 4, 7, 9]
    unique, count = OPS._unique_sorted_keys(keys[:0])
    assert count.tolist() == [0] and unique.shape == (0,)
    assert OPS._unique_sorted_keys(torch.full((3,), INT64_MAX))[1].tolist() == [0]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_gather_primitives_against_a_loop_over_rows(dtype):
    g = torch.Generator().manual_seed(3)
    features = torch.randn(9, 4, generator=g, dtype=torch.float64).to(dtype)
    weight = torch.randn(3, 4, 5, generator=g, dtype=torch.float64).to(dtype)
    grad = torch.randn(6, 5, generator=g, dtype=torch.float64).to(dtype)
    nbr = torch.randint(-1, 9, (6, 3), generator=g, dtype=torch.int32)
    features[0] = float("nan")
    nbr[:, 1] = torch.where(nbr[:, 1] == 0, -1, nbr[:, 1])   # row 0 (NaN) only where present
    out, dw = torch.zeros(6, 5, dtype=torch.float64), torch.zeros(3, 4, 5, dtype=torch.float64)
    for m in range(6):
        for k in range(3):
            i = int(nbr[m, k])
            if i >= 0:
                out[m] += features[i].double() @ weight[k].double()
                dw[k] += torch.outer(features[i].double(), grad[m].double())
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    got = OPS._gather_mm_one_group(features, weight, nbr)
    assert got.dtype == dtype and torch.allclose(got.double(), out, rtol=tol, atol=tol * 10, equal_nan=True)
    assert torch.isnan(got).any(1).tolist() == (nbr == 0).any(1).tolist()   # NaN only through present rows
    got = OPS._gather_mm_backprop_filter_one_group(features, grad, nbr)
    assert got.dtype == dtype and torch.allclose(got.double(), dw, rtol=tol, atol=tol * 10, equal_nan=True)


# ---- the orchestration's maps: bit-equal to the CPU backend, the same errors

SUBM = [([3, 3, 3], [1, 1, 1]), ([2, 2, 2], [1, 1, 1]), ([5, 5, 5], [1, 1, 1]), ([3, 1, 3], [2, 1, 1]),
        ([1, 1, 1], [1, 1, 1]), ([2, 3, 4], [1, 2, 1]), ([4, 4, 4], [2, 2, 2])]
CONV = [([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]), ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]),
        ([3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]), ([2, 3, 1], [1, 2, 3], [0, 1, 0], [2, 1, 1]),
        ([3, 3, 3], [2, 2, 2], [0, 0, 0], [2, 2, 2]), ([5, 5, 5], [3, 3, 3], [4, 4, 4], [1, 1, 1]),
        # _conv_out_keys' lattice slots where gcd(stride, dilation) > 1 and where a modular inverse is needed
        ([5, 3, 3], [4, 3, 2], [2, 1, 0], [2, 3, 1]), ([4, 2, 3], [2, 2, 3], [1, 0, 2], [1, 1, 2])]


@pytest.mark.parametrize("kernel,dilation", SUBM)
def test_subm_map_bitwise_equal(kernel, dilation):
    idx = voxels([6, 7, 8], 2, 150, 4)
    args = ([6, 7, 8], 2, kernel, dilation)
    assert torch.equal(ACC["build_subm_map"](idx, *args), OPS.build_subm_map(idx, *args))


@pytest.mark.parametrize("kernel,stride,padding,dilation", CONV)
def test_conv_map_bitwise_equal(kernel, stride, padding, dilation):
    idx = voxels([6, 7, 8], 2, 150, 5)
    args = ([6, 7, 8], 2, kernel, stride, padding, dilation)
    got, want = ACC["build_conv_map"](idx, *args), OPS.build_conv_map(idx, *args)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and list(got[2]) == want[2]


def test_other_ranks_and_empty_inputs():
    idx2 = voxels([9, 11, 1], 1, 40, 6)[:, :3].contiguous()
    assert torch.equal(ACC["build_subm_map"](idx2, [9, 11], 1, [3, 3], [1, 1]),
                       OPS.build_subm_map(idx2, [9, 11], 1, [3, 3], [1, 1]))
    got = ACC["build_conv_map"](idx2, [9, 11], 1, [3, 3], [2, 2], [0, 0], [1, 1])
    want = OPS.build_conv_map(idx2, [9, 11], 1, [3, 3], [2, 2], [0, 0], [1, 1])
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and list(got[2]) == want[2] == [4, 5]
    empty = torch.zeros((0, 4), dtype=torch.int32)
    assert ACC["build_subm_map"](empty, [4, 4, 4], 1, [3, 3, 3], [1, 1, 1]).shape == (0, 27)
    out, nbr, out_shape = ACC["build_conv_map"](empty, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert out.shape == (0, 4) and nbr.shape == (0, 27) and list(out_shape) == [2, 2, 2]
    # an input no output reaches (kernel 1, stride 3: outputs read coordinates 0 and 3 only)
    lone = torch.tensor([[0, 2, 2, 2]], dtype=torch.int32)
    got = ACC["build_conv_map"](lone, [4, 4, 4], 1, [1, 1, 1], [3, 3, 3], [0, 0, 0], [1, 1, 1])
    want = OPS.build_conv_map(lone, [4, 4, 4], 1, [1, 1, 1], [3, 3, 3], [0, 0, 0], [1, 1, 1])
    assert got[0].shape == (0, 4) and torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("row,value", [(3, [0, -1, 0, 0]), (7, [2, 0, 0, 0]), (0, [0, 0, 6, 0]),
                                       (59, [0, 0, 0, 7]), (11, [-1, 0, 0, 0]), (4, [1, 4, 5, 2 ** 30])])
def test_rows_outside_the_grid_give_the_cpu_error(row, value):
    idx = voxels([5, 6, 7], 2, 60, 0)
    idx[row] = torch.tensor(value, dtype=torch.int32)
    want = error(lambda: OPS.build_subm_map(idx, [5, 6, 7], 2, [3, 3, 3], [1, 1, 1]))
    assert want.startswith(f"indices: row {row} is (batch, *coords)")
    assert error(lambda: ACC["build_subm_map"](idx, [5, 6, 7], 2, [3, 3, 3], [1, 1, 1])) == want
    conv = ([5, 6, 7], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert error(lambda: ACC["build_conv_map"](idx, *conv)) == error(lambda: OPS.build_conv_map(idx, *conv)) == want


@pytest.mark.parametrize("first,second", [(0, 1), (5, 40), (58, 59), (2, 30)])
def test_duplicate_voxels_give_the_cpu_error(first, second):
    idx = voxels([5, 6, 7], 2, 60, 1)
    idx[second] = idx[first]
    conv = ([5, 6, 7], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    want = error(lambda: OPS.build_conv_map(idx, *conv))
    assert f"at row {second};" in want
    assert error(lambda: ACC["build_conv_map"](idx, *conv)) == want
    subm = ([5, 6, 7], 2, [3, 3, 3], [1, 1, 1])
    assert error(lambda: ACC["build_subm_map"](idx, *subm)) == error(lambda: OPS.build_subm_map(idx, *subm)) == want


def test_argument_errors_equal_the_cpu_kernels():
    idx = voxels([5, 6, 7], 2, 10, 0)
    # (the dtype case names the dtype the Python way, torch.int64, until mx_sparse._core.contract gives the
    # C++ wording, Long: compared up to the dtype name)
    assert error(lambda: ACC["build_subm_map"](idx.long(), [5, 6, 7], 2, [3, 3, 3], [1, 1, 1])).startswith(
        "indices: expected dtype int32, got ")
    cases = [(idx, [5, 6], 2), (idx, [5, 0, 7], 2), (idx, [5, 6, 7], 0)]
    for args in cases:
        want = error(lambda: OPS.build_subm_map(*args, [3, 3, 3], [1, 1, 1]))
        assert error(lambda: ACC["build_subm_map"](*args, [3, 3, 3], [1, 1, 1])) == want
    bad_geometry = [([3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]), ([3, 3, 3], [0, 2, 2], [1, 1, 1], [1, 1, 1]),
                    ([9, 9, 9], [1, 1, 1], [0, 0, 0], [1, 1, 1])]
    for geometry in bad_geometry:
        want = error(lambda: OPS.build_conv_map(idx, [5, 6, 7], 2, *geometry))
        assert error(lambda: ACC["build_conv_map"](idx, [5, 6, 7], 2, *geometry)) == want


def test_padded_grid_beyond_int64_keys_is_a_clear_error():
    """The accelerator builders pad the grid by the kernel's reach; a grid that fits int64 keys
    only without that padding is refused naming the argument (the CPU builders accept it)."""
    shape = [2 ** 21 - 1, 2 ** 21 - 1, 2 ** 21 - 1]   # 2^63 - ... cells: fits, padded by 2 per axis it does not
    idx = torch.zeros((1, 4), dtype=torch.int32)
    message = error(lambda: ACC["build_subm_map"](idx, shape, 1, [5, 5, 5], [1, 1, 1]))
    assert message.startswith("spatial_shape: batch_size (1) x the grid padded by the kernel's reach")


def maps():
    idx = voxels([6, 7, 8], 2, 120, 2)
    yield OPS.build_subm_map(idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1]), 120
    out, nbr, _ = OPS.build_conv_map(idx, [6, 7, 8], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    yield nbr, 120
    yield OPS.transpose_map(nbr, 120), out.shape[0]
    yield torch.full((5, 27), -1, dtype=torch.int32), 0
    yield torch.full((0, 8), -1, dtype=torch.int32), 4
    yield torch.full((3, 0), -1, dtype=torch.int32), 2


@pytest.mark.parametrize("case", range(6))
def test_transpose_map_bitwise_equal(case):
    nbr, num_rows = list(maps())[case]
    got = ACC["transpose_map"](nbr, num_rows)
    assert got.dtype == torch.int32 and torch.equal(got, OPS.transpose_map(nbr, num_rows))


def test_transpose_map_errors_equal_the_cpu_kernel():
    nbr = OPS.build_subm_map(voxels([6, 7, 8], 2, 120, 3), [6, 7, 8], 2, [3, 3, 3], [1, 1, 1])
    twice = nbr.clone()
    twice[17, 5], twice[40, 5] = 3, 3                 # input row 3 named twice at offset 5 (or thrice)
    twice[40, 9], twice[55, 9] = 8, 8                 # and at offset 9
    below, beyond = nbr.clone(), nbr.clone()
    below[30, 2], beyond[12, 26] = -2, 120
    for args in [(twice, 120), (below, 120), (beyond, 120), (nbr, -1), (nbr, 2 ** 31 - 1)]:
        assert error(lambda: ACC["transpose_map"](*args)) == error(lambda: OPS.transpose_map(*args))
    assert "both name input row" in error(lambda: OPS.transpose_map(twice, 120))
    for args in [(nbr.long(), 120), (nbr[0], 120)]:     # dtype names: see test_argument_errors_equal_the_cpu_kernels
        assert error(lambda: ACC["transpose_map"](*args)).startswith("nbr: expected an int32 neighbor map [M, K], got ")


# ---- the per-group loop (the project's only one) against the CPU backend's grouped kernels

@pytest.mark.parametrize("groups,cin,cout", [(1, 8, 12), (2, 16, 24), (4, 32, 16)])
def test_grouped_gathers_equal_the_cpu_kernels(groups, cin, cout):
    idx = voxels([6, 7, 8], 2, 120, 7)
    nbr = OPS.build_subm_map(idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1])
    g = torch.Generator().manual_seed(groups)
    f = torch.randn(120, cin, generator=g, dtype=torch.float64)
    w = torch.randn(27, cin // groups, cout, generator=g, dtype=torch.float64)
    grad = torch.randn(120, cout, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ACC["gather_mm"](f, w, nbr, None, groups), OPS.gather_mm(f, w, nbr, None, groups),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ACC["gather_mm_backprop_filter"](f, grad, nbr, None, groups),
                               OPS.gather_mm_backprop_filter(f, grad, nbr, None, groups), rtol=1e-12, atol=1e-12)


def test_gather_errors_name_the_argument():
    nbr = torch.full((4, 27), -1, dtype=torch.int32)
    f, w = torch.ones(5, 6), torch.ones(27, 3, 4)
    assert error(lambda: ACC["gather_mm"](f, w, nbr, None, 3)).startswith("weight: expected Cin/groups")
    assert error(lambda: ACC["gather_mm"](f, w.double(), nbr, None, 2)).startswith("weight: expected dtype")
    assert error(lambda: ACC["gather_mm_backprop_filter"](f, torch.ones(4, 5), nbr, None, 2)).startswith("groups:")


def test_map_rows_assertion_names_the_map_and_the_row_range():
    """index_checks.assert_map_rows (the CUDA plans' and the NPU gathers' device-side check): entries in
    [-1, rows) pass, one below -1 or at rows fails with the map's name and the range (at once on CPU
    tensors, at the next synchronisation on a device)."""
    from mx_sparse._accelerator import index_checks
    nbr = torch.tensor([[0, -1], [2, 1]], dtype=torch.int32)
    index_checks.assert_map_rows(nbr, 3, "nbr")
    index_checks.assert_map_rows(nbr[:0], 0, "nbr")
    for bad in (3, -2):
        with pytest.raises(RuntimeError, match=r"nbr_t: holds an entry outside \[-1, 3\), i.e. not an input row"):
            index_checks.assert_map_rows(torch.tensor([[0, bad]], dtype=torch.int32), 3, "nbr_t")


def test_gathers_read_user_maps_on_every_device_but_cuda(monkeypatch):
    """check_gather_map (and check_pool_map) reads a map the builders did not make (CPU tensors and the NPU, whose
    AscendC gathers read the named rows unchecked: the CPU kernel's ValueError), reads nothing of a
    builder's unchanged map, and leaves CUDA maps to their plans' device-side assertion (a fake CUDA
    tensor here: no data is touched)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from mx_sparse._accelerator import built_maps, index_checks
    reads = []
    aminmax = torch.aminmax
    monkeypatch.setattr(torch, "aminmax", lambda t: reads.append(t.device.type) or aminmax(t))
    user = torch.tensor([[0, -1], [7, 1]], dtype=torch.int32)
    with pytest.raises(ValueError, match="nbr"):
        index_checks.check_gather_map(user, 5)
    index_checks.check_gather_map(user, 8)
    assert reads == ["cpu", "cpu"]
    built = user.clone()
    built_maps.vouch_map(built, 8)
    index_checks.check_gather_map(built, 8)
    assert reads == ["cpu", "cpu"]
    with FakeTensorMode(allow_non_fake_inputs=True):
        on_cuda = torch.empty((4, 27), dtype=torch.int32, device="cuda")
    index_checks.check_gather_map(on_cuda, 5)
    assert reads == ["cpu", "cpu"]
    # pooling's maps likewise (the CPU kernel's message names the lowest and highest entry)
    with pytest.raises(ValueError, match="nbr"):
        index_checks.check_pool_map(user, 5)
    index_checks.check_pool_map(built, 8)
    assert reads == ["cpu", "cpu", "cpu"]


def test_fallbacks_are_what_every_device_without_a_kernel_gets():
    for name in registration.PRIMITIVE_NAMES:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"mx_sparse::{name}", "CompositeExplicitAutograd")
    assert set(fallback.PRIMITIVES) == set(registration.PRIMITIVE_NAMES)


def test_conv_out_keys_sees_only_rows_inside_the_grid():
    """_conv_out_keys runs before the one host read that checks the indices: rows outside the grid
    reach it replaced by a valid row (the primitive's contract), and the CPU error is still raised."""
    from torch.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Recording(TorchDispatchMode):
        """Sees the primitive as the dispatcher calls it (from the C++ stage of the builder)."""
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.mx_sparse._conv_out_keys.default:
                seen.append(args[0].clone())
            return func(*args, **(kwargs or {}))

    idx = voxels([5, 6, 7], 2, 60, 2)
    idx[9] = torch.tensor([0, 0, -4, 2 ** 30], dtype=torch.int32)
    conv = ([5, 6, 7], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    with Recording():
        got = error(lambda: ACC["build_conv_map"](idx, *conv))
    assert got == error(lambda: OPS.build_conv_map(idx, *conv))
    rows = seen[0]
    assert rows.dtype == torch.int32 and rows[9].tolist() == [0, 0, 0, 0] and torch.equal(rows[:9], idx[:9])
    assert bool(((rows[:, 1:] >= 0) & (rows[:, 1:] < torch.tensor([5, 6, 7]))).all())
