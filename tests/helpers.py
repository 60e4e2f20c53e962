"""Small random sparse inputs for the unit tests, and a recorder of the operators a block runs."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def random_voxels(spatial_shape, batch_size, density=0.3, empty_batches=(), seed=0):
    """Unique (batch, *coords) rows, a random fraction of each sample's grid, in a
    shuffled order (so no test relies on sorted input)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for b in range(batch_size):
        if b in empty_batches:
            continue
        grid = torch.stack(torch.meshgrid(*[torch.arange(s) for s in spatial_shape], indexing="ij"), -1)
        grid = grid.reshape(-1, len(spatial_shape))
        keep = torch.rand(grid.shape[0], generator=g) < density
        coords = grid[keep]
        rows.append(torch.cat([torch.full((coords.shape[0], 1), b), coords], 1))
    idx = torch.cat(rows) if rows else torch.zeros(0, 1 + len(spatial_shape), dtype=torch.long)
    perm = torch.randperm(idx.shape[0], generator=g)
    return idx[perm].int()


def random_features(n, channels, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, channels, generator=g, dtype=torch.float64).to(dtype)


def rows_as_set(indices):
    return {tuple(r) for r in indices.tolist()}


class RecordedCalls(TorchDispatchMode):
    """The operators dispatched inside ``with RecordedCalls() as calls:``, in ``calls.seen`` as
    (name, the first argument's dim, or None where it is no tensor)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        self.seen.append((str(func), None if first is None else first.dim()))
        return func(*args, **(kwargs or {}))


def input_gradient_calls(seen):
    """(_gather_mm_transposed calls, index_select or clone copies of a 3-D tensor) among ``seen``: an
    input gradient reading the layers' weights in place, or making their transposed copies."""
    transposed = sum(name == "mx_sparse._gather_mm_transposed.default" for name, _ in seen)
    copies = sum(name in ("aten.index_select.default", "aten.clone.default") and dim == 3 for name, dim in seen)
    return transposed, copies
