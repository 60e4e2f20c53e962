"""pytest plugin of tests/compat/test_mmcv_suite.py: mmcv's own tests run with mx_sparse's sparse
ops in mmcv.ops (``mx_sparse.patch_mmcv()``, which also registers the sparse conv types that
mmcv's ``build_conv_layer`` looks up), patched before mmcv's test modules are imported."""
import mx_sparse

mx_sparse.patch_mmcv()
