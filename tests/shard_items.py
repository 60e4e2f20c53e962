"""pytest plugin (-p shard_items): with MXS_TEST_SHARD=i/n, this session runs only every n-th
collected test starting at the i-th (the rest deselected), so that one long child session can
be run as n shorter ones that together run every test once."""
import os


def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("MXS_TEST_SHARD")
    if not spec:
        return
    i, n = (int(x) for x in spec.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"MXS_TEST_SHARD: expected i/n with 0 <= i < n, got {spec!r}")
    keep = [item for j, item in enumerate(items) if j % n == i]
    config.hook.pytest_deselected(items=[item for j, item in enumerate(items) if j % n != i])
    items[:] = keep
