"""Index-by-index references for the two compute primitives, in float64, and
random neighbor maps to feed them: loops over offsets with torch indexing and
matmul, sharing nothing with the kernels under test."""
import torch


def random_map(m, n_in, kvol, density, seed):
    g = torch.Generator().manual_seed(seed)
    nbr = torch.randint(0, n_in, (m, kvol), generator=g, dtype=torch.int32)
    return torch.where(torch.rand(m, kvol, generator=g) < density, nbr, torch.full_like(nbr, -1))


def gather_mm_reference(x, w, nbr, groups):
    """out[m] = sum_k x[nbr[m, k]] @ W[k], per group, in float64."""
    x, w = x.double(), w.double()
    m, kvol = nbr.shape
    cin_g, cout = w.shape[1], w.shape[2]
    cout_g = cout // groups
    out = torch.zeros(m, cout, dtype=torch.float64)
    for k in range(kvol):
        rows = (nbr[:, k] >= 0).nonzero().flatten()
        src = x[nbr[rows, k].long()]
        for g in range(groups):
            out[rows, g * cout_g:(g + 1) * cout_g] += (src[:, g * cin_g:(g + 1) * cin_g]
                                                       @ w[k][:, g * cout_g:(g + 1) * cout_g])
    return out


def filter_reference(x, grad, nbr, groups):
    """dW[k] = sum_m x[nbr[m, k]]^T grad[m], per group, in float64."""
    x, grad = x.double(), grad.double()
    kvol = nbr.shape[1]
    cin_g, cout = x.shape[1] // groups, grad.shape[1]
    cout_g = cout // groups
    dw = torch.zeros(kvol, cin_g, cout, dtype=torch.float64)
    for k in range(kvol):
        rows = (nbr[:, k] >= 0).nonzero().flatten()
        src = x[nbr[rows, k].long()]
        for g in range(groups):
            dw[k][:, g * cout_g:(g + 1) * cout_g] = (src[:, g * cin_g:(g + 1) * cin_g].T
                                                     @ grad[rows, g * cout_g:(g + 1) * cout_g])
    return dw
