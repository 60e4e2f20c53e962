"""``spconv.constants``: the flags client code reads or sets. They are plain, settable
module attributes; mx_sparse's kernels do not depend on them (``SPCONV_USE_DIRECT_TABLE``
selects a hash-table variant in spconv; mx_sparse always uses its own O(N) table)."""
import os

NDIM_DONT_CARE = 3
FILTER_HWIO = False
SAVED_WEIGHT_LAYOUT = os.getenv("SPCONV_SAVED_WEIGHT_LAYOUT", "")
ALL_WEIGHT_IS_KRSC = True
SPCONV_DEBUG_WEIGHT = False
SPCONV_CPP_INDICE_PAIRS = True
SPCONV_USE_DIRECT_TABLE = True
SPCONV_CPP_INDICE_PAIRS_IGEMM = False
SPCONV_CPP_GEMM = True
SPCONV_FX_TRACE_MODE = os.getenv("SPCONV_FX_TRACE_MODE", "0") == "1"
SPCONV_DIRECT_TABLE_HASH_SIZE_SCALE = 1.1
SPCONV_ALLOW_TF32 = False
SPCONV_DO_SORT = True
SPCONV_BWD_SPLITK = [1, 2, 4, 8, 16, 32, 64]
