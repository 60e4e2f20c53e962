"""What the map builders vouch for, so that it is checked once and not again per call.

Two weak registries (keyed by tensor identity; an entry goes with its tensor), each entry valid
while the tensor's in-place version counter is unchanged (an inference tensor has none, so it is
never registered: a write to it could not be seen):

- checked indices: index rows that passed a builder's value checks (inside the grid and the
  batch, no voxel twice) or that a strided / transposed builder emitted (in its output grid and
  distinct by construction). A later builder on the same tensor, with a grid and batch at least
  as large, skips the checks -- and a submanifold builder its one host read. The rows a strided
  builder emitted are also ascending in (batch, *coords) order (``sorted``): a builder on them
  skips its key sort (neighbor_map.py).
- built maps: a map a builder emitted, with the number of input rows its entries name (every
  entry in [-1, rows), each (input row, offset) at most once). The gathers skip their range
  check for it, and ``transpose_map`` skips its checks and host read; the transpose is kept
  with the map (the map's owner, an ``indice_key``, holds both), so the layers and backward
  passes that share the key compute it once; so are its rows' neighbour bitmasks where the
  device lookup wrote them (CUDA), which the map's plans then need not compute, and for a
  strided map those of its transpose's rows, where the device's _conv_out_keys wrote them.

Nothing here reads device data. Under torch.compile the ops run on the graph's tensors: a tensor
the registry does not know is checked as before.
"""
import weakref
from typing import Optional, Sequence

import torch
from .._core.weak_id_map import WeakIdMap

_checked_indices = WeakIdMap()
_built_maps = WeakIdMap()


def _version(t: torch.Tensor) -> Optional[int]:
    return None if t.is_inference() else t._version


def vouch_indices(indices: torch.Tensor, shape: Sequence[int], batch_size: int, ascending: bool = False) -> None:
    """``indices`` are distinct rows inside ``shape`` (batch index first) and below ``batch_size``;
    with ``ascending``, in ascending (batch, *coords) order too."""
    version = _version(indices)
    if version is not None:
        _checked_indices[indices] = (version, tuple(shape), batch_size, ascending)


def indices_checked(indices: torch.Tensor, shape: Sequence[int], batch_size: int) -> bool:
    """True when ``indices`` are known to pass the checks on ``shape`` and ``batch_size``: vouched for on
    a grid and batch no larger, and not written to since."""
    return indices_state(indices, shape, batch_size)[0]


def indices_state(indices: torch.Tensor, shape: Sequence[int], batch_size: int):
    """(checked, ascending): ``indices_checked``, and whether they are also vouched for as ascending
    in (batch, *coords) order (a strided builder's outputs; False where not checked)."""
    entry = _checked_indices.get(indices)
    if entry is None or entry[0] != _version(indices):
        return False, False
    _, known_shape, known_batch, ascending = entry
    try:
        checked = (known_batch <= batch_size and len(known_shape) == len(shape)
                   and all(k <= s for k, s in zip(known_shape, shape)))
    except TypeError:   # a malformed shape or batch size: not vouched for; the builder's checks name it
        return False, False
    return checked, checked and ascending


class _Built:
    __slots__ = ("version", "rows", "transpose", "transpose_version", "row_key", "transpose_row_key")

    def __init__(self, version, rows, row_key, transpose_row_key):
        self.version, self.rows, self.row_key, self.transpose_row_key = version, rows, row_key, transpose_row_key
        self.transpose, self.transpose_version = None, None


def vouch_map(nbr: torch.Tensor, rows: int, row_key: Optional[torch.Tensor] = None,
              transpose_row_key: Optional[torch.Tensor] = None) -> None:
    """``nbr`` is a map a builder made: entries in [-1, rows), each (input row, offset) once;
    ``row_key``, where given, its rows' neighbour bitmasks (see result_row_key), and
    ``transpose_row_key`` [rows] those of its transpose on ``rows`` rows (see result_row_key)."""
    version = _version(nbr)
    if version is not None:
        _built_maps[nbr] = _Built(version, rows, row_key, transpose_row_key)


def row_key(nbr: torch.Tensor) -> Optional[torch.Tensor]:
    """The neighbour bitmask of each row of a built (unchanged) map, where its lookup wrote them
    (map_plan.py's row key), else None: the plan computes them (row_mask_kernel)."""
    entry = _entry(nbr)
    return None if entry is None else entry.row_key


def _entry(nbr: torch.Tensor) -> Optional[_Built]:
    entry = _built_maps.get(nbr)
    return entry if entry is not None and entry.version == _version(nbr) else None


def built_rows(nbr: torch.Tensor) -> Optional[int]:
    """The input rows a built (unchanged) map names entries below, or None for any other map."""
    entry = _entry(nbr)
    return None if entry is None else entry.rows


def built_for(nbr: torch.Tensor, num_rows: int) -> bool:
    """True when ``nbr`` is a builder's unchanged map whose entries all lie in [-1, num_rows): valid
    for gathering from ``num_rows`` input rows without a check."""
    rows = built_rows(nbr)
    return rows is not None and rows <= num_rows


def transpose_of(nbr: torch.Tensor) -> Optional[torch.Tensor]:
    """The transpose kept with a built map (unchanged, and the transpose unchanged too), or None."""
    entry = _entry(nbr)
    if entry is None or entry.transpose is None or entry.transpose_version != _version(entry.transpose):
        return None
    return entry.transpose


# What a device map primitive (CUDA, mx_sparse/_cuda/map_primitives.py) wrote beside its result in
# the same launch: row keys (map_plan.py's neighbour bitmasks, bit k for the first 63 offsets k),
# keyed by the result tensor (one registry: the results are distinct tensors). A builder that makes
# a map from that result keeps them with the map (vouch_map); a result no builder takes (another
# caller's) drops its entry with it.
# - _sorted_key_lookup's result [S, K]: each result row's bitmask of the offsets found: the map's
#   row keys (vouch_map's row_key, in the map's row order).
# - _conv_out_keys' result [J * N]: each input row's bitmask of the offsets k whose pair (k, n)
#   reaches an output. Every output a pair reaches is one of the strided map's outputs (they are
#   those pairs' distinct keys), and its lookup finds that input there: input n has offset k in the
#   map's transpose exactly where the pair (k, n) reaches an output, so these are the transpose's
#   row keys (ConvMapBuild.take_pair_keys, vouch_map's transpose_row_key), for the transpose on
#   the map's own input rows.
_result_row_keys = WeakIdMap()


def keep_result_row_key(result: torch.Tensor, key: torch.Tensor) -> None:
    """``key`` holds the row keys a map primitive's launch wrote beside ``result`` (above)."""
    if _version(result) is not None:
        _result_row_keys[result] = (result._version, key)


def result_row_key(result: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The row keys kept with ``result`` (unchanged since), else None."""
    entry = None if result is None else _result_row_keys.get(result)
    return entry[1] if entry is not None and entry[0] == _version(result) else None


def keep_transpose(nbr: torch.Tensor, nbr_t: torch.Tensor) -> None:
    """Keeps ``nbr_t`` with the built map ``nbr`` (and vouches for it: entries below nbr's row count;
    with its row keys where the builder kept them and ``nbr_t`` has the map's input rows)."""
    entry = _entry(nbr)
    if entry is not None and _version(nbr_t) is not None:
        entry.transpose, entry.transpose_version = nbr_t, nbr_t._version
        key = entry.transpose_row_key
        vouch_map(nbr_t, nbr.shape[0], key if key is not None and nbr_t.shape[0] == entry.rows else None)


# Packed forms pack_map made (keyed by their values tensor): the three tensors as made (identity
# and version), and the input row count of the map, if a builder made it. Lets unpack_map skip
# its consistency checks (and their host read) for a packed form nobody has changed, and vouch
# for the map it gives back as for the map that was packed.
_packed_forms = WeakIdMap()


def vouch_packed(nbr: torch.Tensor, mask: torch.Tensor, values: torch.Tensor, block_starts: torch.Tensor) -> None:
    """``(mask, values, block_starts)`` is pack_map's output for ``nbr`` (consistent by construction)."""
    versions = [_version(t) for t in (mask, values, block_starts)]
    if None not in versions:
        _packed_forms[values] = (weakref.ref(mask), weakref.ref(block_starts), versions, built_rows(nbr))


def packed_unchanged(mask: torch.Tensor, values: torch.Tensor, block_starts: torch.Tensor):
    """(True, rows or None) when the three tensors are one packed form as pack_map made it, unchanged;
    else (False, None)."""
    entry = _packed_forms.get(values)
    if entry is None or entry[0]() is not mask or entry[1]() is not block_starts:
        return False, None
    if entry[2] != [_version(t) for t in (mask, values, block_starts)]:
        return False, None
    return True, entry[3]
