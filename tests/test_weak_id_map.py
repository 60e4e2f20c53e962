"""mx_sparse._core.weak_id_map.WeakIdMap against torch.utils.weak.WeakIdKeyDictionary's behaviour
(the map it stands in for): by identity, not equality; an entry goes when its object is freed;
never found for another object that gets the freed object's id."""
import gc

import torch

from mx_sparse._core.weak_id_map import WeakIdMap


def test_by_identity_not_by_value():
    m = WeakIdMap()
    a, b = torch.zeros(3), torch.zeros(3)
    m[a] = "a"
    assert m.get(a) == "a" and m.get(b) is None and m.get(b, 7) == 7
    m[a] = "again"
    assert m.get(a) == "again" and len(m) == 1


def test_entry_goes_with_its_object():
    m = WeakIdMap()
    kept = torch.ones(2)
    m[kept] = 1
    for _ in range(5):
        m[torch.ones(4)] = 2          # freed at once
    gc.collect()
    assert len(m) == 1 and m.get(kept) == 1
    del kept
    gc.collect()
    assert len(m) == 0


def test_a_tensor_saved_by_autograd_keeps_its_entry():
    """A tensor that a custom Function saves (not one of its outputs: as the fused BatchNorm saves
    its float64 mean) keeps its entry while the graph holds it, though its Python name is gone,
    and is found again, as itself, in backward."""
    m, found = WeakIdMap(), []

    class Saves(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            kept = x * 3
            m[kept] = "kept"
            ctx.save_for_backward(kept)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            found.append(m.get(ctx.saved_tensors[0]))
            return grad

    y = Saves.apply(torch.randn(4, requires_grad=True))
    gc.collect()
    assert len(m) == 1
    y.sum().backward()
    assert found == ["kept"]
    del y
    gc.collect()
    assert len(m) == 0


def test_never_found_for_a_reused_id():
    m = WeakIdMap()

    class Box:
        pass
    seen = 0
    for _ in range(200):
        b = Box()
        assert m.get(b) is None   # a freed Box's id is often reused at once
        m[b] = seen
        seen += 1
        del b
    assert len(m) == 0


def test_setdefault_and_pop_follow_identity():
    import torch
    from mx_sparse._core.weak_id_map import WeakIdMap
    table = WeakIdMap()
    a, b = torch.zeros(2), torch.zeros(2)          # equal values, different objects
    assert table.setdefault(a, {"k": 1}) == {"k": 1}
    assert table.setdefault(a, {"k": 2}) == {"k": 1}   # the entry made first stays
    assert table.pop(b, "none") == "none"          # another object: no entry to remove
    assert a in table and b not in table
    assert table.pop(a) == {"k": 1} and table.get(a) is None and len(table) == 0 and a not in table
    table[b] = 3
    table.clear()
    assert b not in table and len(table) == 0
