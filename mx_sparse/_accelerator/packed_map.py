"""pack_map / unpack_map of the accelerator backends (CUDA, NPU), from torch's operators: the CPU kernels' format
and checks (kernels/contract/packed_map_args.h, through mx_sparse._core.contract), the same tensors bit for bit, so a training step on an
accelerator holds the maps no layer is using packed as it does on the CPU (mx_sparse/nn/packed_map.py).

  mask [M, ceil(K/16)] int16   bit j of mask[m, w] set where nbr[m, 16w + j] >= 0
  values [P] int32             the present entries in row-major order
  block_starts [blocks + 1]    index in values of the first entry of each block of 1024 rows

Each op reads the device once (its checks, plus pack_map's number of present entries), except
unpack_map on a packed form pack_map made and nobody changed since (built_maps.py): consistent
by construction, it reads nothing, and the map it gives back is vouched for as the packed one was.
Indexing avoids Python's [] for the reason given in neighbor_map.py.
"""
import torch

from . import built_maps, host_sync, op_args

ROWS_PER_BLOCK = op_args.PACK_ROWS_PER_BLOCK  # part of the format
LANES = op_args.PACK_LANES                    # offsets per mask word


def _cdiv(a, b):
    return -(-a // b)


def _lane_weights(device):
    return torch.pow(2, torch.arange(LANES, device=device, dtype=torch.int32))


def _present(mask, kvol):
    """[M, kvol] bool from the mask words (bits beyond kvol ignored)."""
    bits = (mask.int().unsqueeze(2) & _lane_weights(mask.device)) != 0
    return bits.reshape(mask.shape[0], mask.shape[1] * LANES).narrow(1, 0, kvol)


def _block_counts(present, blocks):
    per_row = present.sum(1)
    padded = torch.nn.functional.pad(per_row, (0, blocks * ROWS_PER_BLOCK - per_row.shape[0]))
    return padded.view(blocks, ROWS_PER_BLOCK).sum(1)


def pack_map(nbr):
    op_args.pack_map_operands(nbr)
    m, kvol = nbr.shape
    words, blocks, dev = _cdiv(kvol, LANES), _cdiv(m, ROWS_PER_BLOCK), nbr.device
    nbr = nbr.contiguous()
    present = nbr >= 0
    flat = torch.arange(m * kvol, device=dev).view(m, kvol)
    first_bad = torch.where(nbr < -1, flat, m * kvol).amin() if m * kvol else torch.zeros((), dtype=torch.long,
                                                                                            device=dev)
    count = present.sum()
    first_bad, total = host_sync.read(torch.stack([first_bad, count]), "pack_map: entries >= -1 and value count")
    if m * kvol and first_bad < m * kvol:
        r, k = divmod(first_bad, kvol)
        value, = host_sync.read(nbr.select(0, r).narrow(0, k, 1), "error message")
        op_args.pack_map_entries(first_bad, value, kvol)
    lanes = torch.nn.functional.pad(present.int(), (0, words * LANES - kvol))
    bits = (lanes.view(m, words, LANES) * _lane_weights(dev)).sum(2, dtype=torch.int32)
    mask = (bits - (bits >= 1 << 15).int() * (1 << 16)).to(torch.int16)   # the 16 bits, as int16
    values = torch.full((total,), -1, dtype=torch.int32, device=dev)
    if total:
        at = torch.cumsum(present.reshape(-1), 0) - 1
        # one writer per value; absent entries send -1 to value 0, which max-reduction ignores
        values.scatter_reduce_(0, torch.where(present.reshape(-1), at, 0), nbr.view(-1), "amax")
    starts = torch.cat([torch.zeros((1,), dtype=torch.long, device=dev),
                        torch.cumsum(_block_counts(present, blocks), 0)])
    built_maps.vouch_packed(nbr, mask, values, starts)
    return mask, values, starts


def unpack_map(mask, values, block_starts, kvol):
    op_args.unpack_map_operands(mask, values, block_starts, kvol)
    words = _cdiv(kvol, LANES)
    m, blocks = mask.shape[0], _cdiv(mask.shape[0], ROWS_PER_BLOCK)
    total, dev = values.shape[0], mask.device
    present = _present(mask, kvol)
    made_here, rows = built_maps.packed_unchanged(mask, values, block_starts)
    if made_here:       # pack_map's own output, unchanged: consistent, nothing to check or read
        nbr = _unpacked(present, values, m, kvol)
        if rows is not None:
            built_maps.vouch_map(nbr, rows)
        return nbr
    share = torch.diff(block_starts)
    blk = torch.arange(blocks, device=dev)
    decreasing = torch.where(share < 0, blk, blocks).amin() if blocks else torch.zeros((), dtype=torch.long,
                                                                                        device=dev)
    mismatch = (torch.where(_block_counts(present, blocks) != share, blk, blocks).amin() if blocks
                else torch.zeros((), dtype=torch.long, device=dev))
    # lanes past kvol in each row's last word must be clear (pack_map never sets them)
    spare = 0xFFFF & ~((1 << (kvol - (words - 1) * LANES)) - 1)
    rows = torch.arange(m, device=dev)
    spare_row = (torch.where((mask.select(1, words - 1).int() & spare) != 0, rows, m).amin() if m
                 else torch.zeros((), dtype=torch.long, device=dev))
    start, end, decreasing, spare_row, mismatch = host_sync.read(
        torch.stack([block_starts.select(0, 0), block_starts.select(0, blocks), decreasing, spare_row, mismatch]),
        "unpack_map: block_starts checks")
    op_args.unpack_map_starts(start, end, total, decreasing, blocks)
    op_args.unpack_map_mask(spare_row, mismatch, m, kvol)
    return _unpacked(present, values, m, kvol)


def _unpacked(present, values, m, kvol):
    if values.shape[0] == 0:
        return torch.full((m, kvol), -1, dtype=torch.int32, device=present.device)
    at = (torch.cumsum(present.reshape(-1), 0) - 1).clamp_(min=0)
    return torch.where(present.reshape(-1), torch.take(values, at), -1).view(m, kvol)
