// CANN-only helper of the op_host/*_cann.cpp glue (compiled only inside a CANN custom-op project):
// copies a tiling struct into the context's raw tiling buffer, the bytes the kernel reads back as
// its *_tiling_data.h struct. False when the buffer CANN reserved is too small.
#pragma once
#include <cstring>
#include "register/op_def_registry.h"

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

}  // namespace mxs_ascend
