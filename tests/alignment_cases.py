"""The CPU kernels on inputs placed at every offset modulo 64 bytes (views into larger buffers) and
on 1 and 2 threads (in turn), each compared bitwise with the call on fresh, 64-byte-aligned inputs on one
thread (tests/test_alignment.py). Run as a script, it prints {op: [variants tried, differing]} as
JSON for whichever CPU kernel build this process loaded (MXS_CPU_PORTABLE=1: the portable one).

Every output comes freshly allocated from the op, and between variants the heap is disturbed
(tensors of random size allocated and kept), so outputs and the kernels' own temporaries land at
other addresses too: issue 35's dx differed by one ulp with where the heap put it."""
import json
import random
import sys

import torch

OPS = torch.ops.mx_sparse
ALIGN = 64


def placed(t, offset):
    """A copy of ``t`` whose data starts ``offset`` bytes past a 64-byte boundary: a view into a
    larger buffer (offset a multiple of the element size)."""
    step = t.element_size()
    buf = torch.empty(t.numel() + 2 * ALIGN // step, dtype=t.dtype)
    start = (offset - buf.data_ptr() % ALIGN) % ALIGN // step
    view = buf.narrow(0, start, t.numel()).view(t.shape)
    view.copy_(t)
    assert view.data_ptr() % ALIGN == offset
    return view


def offsets(t):
    return range(0, ALIGN, t.element_size())


def voxels(n, shape, generator):
    """n unique (batch 0, z, y, x) int32 rows in ``shape``."""
    total = shape[0] * shape[1] * shape[2]
    keys = torch.randperm(total, generator=generator)[:n].sort().values
    cols = []
    for s in reversed(shape):
        cols.append(keys % s)
        keys = keys // s
    return torch.stack([torch.zeros_like(keys)] + cols[::-1], 1).int()


def cases():
    """op name -> (inputs, fn(*inputs) -> list of output tensors). Sizes give several row blocks,
    so two threads split every reduction and loop."""
    g = torch.Generator().manual_seed(0)
    n, kvol, cin, cout = 1500, 27, 19, 21   # odd channel counts: vector bodies and tails
    shape = [24, 40, 40]
    idx = voxels(n, shape, g)
    nbr = OPS.build_subm_map(idx, shape, 1, [3, 3, 3], [1, 1, 1])   # [n, 27]
    m = n
    out = {}
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        f = torch.randn(n, cin, generator=g).to(dtype)
        w = torch.randn(kvol, cin, cout, generator=g).to(dtype)
        dy = torch.randn(m, cout, generator=g).to(dtype)
        out[f"gather_mm {name}"] = ([f, w, nbr], lambda f, w, nbr: [OPS.gather_mm(f, w, nbr, None, 1)])
        out[f"gather_mm_backprop_filter {name}"] = (
            [f, dy, nbr], lambda f, dy, nbr: [OPS.gather_mm_backprop_filter(f, dy, nbr, None, 1)])
        # 1,100 rows: two full 512-row blocks and a partial one
        x = (torch.randn(1100, cin, generator=g) * 2 + 0.3).to(dtype)
        dx = (torch.randn(1100, cin, generator=g) * 1e-3).to(dtype)
        gamma, beta = (torch.rand(cin, generator=g) + 0.5).to(dtype), (torch.randn(cin, generator=g) * 0.1).to(dtype)

        def bn_forward(x, gamma, beta):
            rm, rv = torch.zeros(x.shape[1], dtype=x.dtype), torch.ones(x.shape[1], dtype=x.dtype)
            return [*OPS.batch_norm_relu_forward(x, gamma, beta, rm, rv, True, 0.1, 1e-3), rm, rv]

        def bn_backward(dy, x, gamma, beta):
            _, mean, invstd, scale, shift = OPS.batch_norm_relu_forward(x, gamma, beta, None, None, True, 0.1, 1e-3)
            return list(OPS.batch_norm_relu_backward(dy, x, mean, invstd, gamma, scale, shift, True))

        def recompute(x, gamma, beta):
            _, _, _, scale, shift = OPS.batch_norm_relu_forward(x, gamma, beta, None, None, True, 0.1, 1e-3)
            return [OPS.scale_shift_relu(x, scale, shift)]

        out[f"batch_norm_relu_forward {name}"] = ([x, gamma, beta], bn_forward)
        out[f"scale_shift_relu {name}"] = ([x, gamma, beta], recompute)
        out[f"batch_norm_relu_backward {name}"] = ([dx, x, gamma, beta], bn_backward)
        if dtype == torch.float32:
            def max_pool(f, nbr):
                y, argmax = OPS.sparse_max_pool(f, nbr)
                return [y, argmax, OPS.sparse_max_pool_backward(torch.ones_like(y), argmax, nbr, f.shape[0])]

            def avg_pool(f, nbr):
                y = OPS.sparse_avg_pool(f, nbr)
                return [y, OPS.sparse_avg_pool_backward(torch.ones_like(y), nbr, f.shape[0])]

            out["sparse_max_pool (+backward) float32"] = ([f, nbr], max_pool)
            out["sparse_avg_pool (+backward) float32"] = ([f, nbr], avg_pool)
    out["build_subm_map"] = ([idx], lambda idx: [OPS.build_subm_map(idx, shape, 1, [3, 3, 3], [1, 1, 1])])
    # (the tensors: the third result, the output spatial shape, is not data)
    out["build_conv_map"] = ([idx], lambda idx: list(OPS.build_conv_map(idx, shape, 1, [3, 3, 3], [2, 2, 2],
                                                                        [1, 1, 1], [1, 1, 1])[:2]))
    out["build_conv_transpose_map"] = ([idx], lambda idx: list(OPS.build_conv_transpose_map(
        idx, shape, 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0])[:2]))
    out["transpose_map, pack_map, unpack_map"] = ([nbr], lambda nbr: [
        OPS.transpose_map(nbr, n), *OPS.pack_map(nbr), OPS.unpack_map(*OPS.pack_map(nbr), kvol)])
    return out


def disturb_heap(junk, rng):
    """Allocates a tensor of random size and keeps it (dropping an old one now and then)."""
    junk.append(torch.empty(rng.randint(1, 20000)))
    if len(junk) > 40:
        junk.pop(rng.randrange(len(junk)))


def run(threads=(1, 2)):
    """{op: [variants tried, differing]}: each input at each offset mod 64 bytes (the others
    aligned), the offsets taking the thread counts in turn."""
    rng, junk, table = random.Random(0), [], {}
    start_threads = torch.get_num_threads()
    for name, (inputs, fn) in cases().items():
        torch.set_num_threads(1)
        reference = fn(*[placed(t, 0) for t in inputs])
        tried = differing = 0
        for i, t in enumerate(inputs):
            for k, offset in enumerate(offsets(t)):
                torch.set_num_threads(threads[k % len(threads)])   # the thread counts in turn
                disturb_heap(junk, rng)
                got = fn(*[placed(u, offset if j == i else 0) for j, u in enumerate(inputs)])
                tried += 1
                differing += not all(torch.equal(a, b) for a, b in zip(got, reference))
        table[name] = [tried, differing]
    torch.set_num_threads(start_threads)
    return table


def batch_norm_digest():
    """sha256 of every output of the fused BatchNorm+ReLU kernels (forward, recompute, backward;
    float32, bfloat16, float64): the AVX-512 and the portable build must give the same bits."""
    import hashlib
    g = torch.Generator().manual_seed(0)
    digest = hashlib.sha256()
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        x = (torch.randn(1100, 19, generator=g) * 2 + 0.3).to(dtype)
        dy = (torch.randn(1100, 19, generator=g) * 1e-3).to(dtype)
        gamma, beta = (torch.rand(19, generator=g) + 0.5).to(dtype), (torch.randn(19, generator=g) * 0.1).to(dtype)
        y, mean, invstd, scale, shift = OPS.batch_norm_relu_forward(x, gamma, beta, None, None, True, 0.1, 1e-3)
        for t in [y, mean, invstd, scale, shift, OPS.scale_shift_relu(x, scale, shift),
                  *OPS.batch_norm_relu_backward(dy, x, mean, invstd, gamma, scale, shift, True)]:
            digest.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    import mx_sparse  # noqa: F401  (registers the ops)
    json.dump(batch_norm_digest() if sys.argv[1:] == ["--bn-digest"] else run(), sys.stdout)
