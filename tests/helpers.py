"""Small random sparse inputs for the unit tests."""
import torch


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
