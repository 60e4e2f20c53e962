// CANN-only helper of the op_host/*_cann.cpp glue (compiled only inside a CANN custom-op project):
// copies a tiling struct into the context's raw tiling buffer, the bytes the kernel reads back as
// its *_tiling_data.h struct. False when the buffer CANN reserved is too small.
#pragma once
#include <cstring>
#include "register/op_def_registry.h"
#if __has_include("mxs_cann_version.h")
#include "mxs_cann_version.h"  // MXS_CANN_VERSION_NUM, written by kernels/ascend/build.sh
#endif

namespace mxs_ascend {

template <typename TilingData>
inline bool StoreTilingData(gert::TilingContext* context, const TilingData& t)
{
    auto* raw = context->GetRawTilingData();
    if (raw->GetCapacity() < sizeof(t)) return false;
    std::memcpy(raw->GetData(), &t, sizeof(t));
    raw->SetDataSize(sizeof(t));
    return true;
}

// Kernels with a cross-core SyncAll (unique_sorted_keys, gather_mm_backprop_filter) must have every
// launched core running at once. The docs disagree on how to ask for that: TilingContext::
// SetScheduleMode's page from CANN 8.0.RC3 and 8.3 on says operators with inter-core
// synchronization need batch mode (1), and 9.0 explains the deadlock without it when another
// stream holds some of the cores; the 7.0 page and 8.0's GetScheduleMode page say batch mode is
// for model execution only and cannot be used through the single-operator (aclnn) API -- the path
// mx_sparse takes. Decision: batch mode when building against CANN >= 8.3 (kernels/ascend/build.sh
// passes MXS_CANN_VERSION_NUM = 100 * major + minor), the default mode before; docs/design.md.
inline ge::graphStatus RequestAllCoresAtOnce(gert::TilingContext* context)
{
#if defined(MXS_CANN_VERSION_NUM) && MXS_CANN_VERSION_NUM >= 803
    return context->SetScheduleMode(1);
#else
    (void)context;
    return ge::GRAPH_SUCCESS;
#endif
}

}  // namespace mxs_ascend
