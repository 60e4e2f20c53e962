// CANN glue of UniqueSortedKeys (NOT compiled here; see gather_mm_cann.cpp): OpDef, tiling
// registration, InferShape. Input keys int64 [C] sorted (INT64_MAX last); outputs ukeys int64 [C]
// (first count[0] entries valid) and count int32 [1]. The kernel uses the hardware SyncAll
// (KERNEL_TYPE_MIX_AIV_1_0), so the workspace is the library's plus C keys and the count slots.
// aclnnUniqueSortedKeysGetWorkspaceSize(keys, ukeys, count, ...) / aclnnUniqueSortedKeys.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "unique_sorted_keys_tiling.h"
#include "cann_tiling_store.h"

namespace optiling {
static ge::graphStatus UniqueSortedKeysTilingFunc(gert::TilingContext* context) {
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    const mxs_ascend::AscendPlatform p{plat.GetCoreNumAic(), plat.GetCoreNumAiv(), ub};
    UniqueSortedKeysTilingData t;
    const int64_t numKeys = context->GetInputShape(0)->GetStorageShape().GetDim(0);
    if (mxs_ascend::UniqueSortedKeysTiling(numKeys, p, t) != mxs_ascend::TILING_OK || t.usedAiv == 0)
        return ge::GRAPH_FAILED;
    if (!mxs_ascend::StoreTilingData(context, t)) return ge::GRAPH_FAILED;
    context->SetBlockDim(t.usedAiv);  // <= AIV count: every core reaches the SyncAll
    if (mxs_ascend::RequestAllCoresAtOnce(context) != ge::GRAPH_SUCCESS) return ge::GRAPH_FAILED;  // SyncAll
    size_t* ws = context->GetWorkspaceSizes(1);
    ws[0] = plat.GetLibApiWorkSpaceSize() + (mxs_ascend::UniqueSortedKeysWorkspaceBytes(t) - mxs_ascend::kSysWorkspace);
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static graphStatus UniqueSortedKeysInferShape(gert::InferShapeContext* context) {
    gert::Shape* ukeys = context->GetOutputShape(0);
    ukeys->SetDimNum(1);
    ukeys->SetDim(0, context->GetInputShape(0)->GetDim(0));
    gert::Shape* count = context->GetOutputShape(1);
    count->SetDimNum(1);
    count->SetDim(0, 1);
    return GRAPH_SUCCESS;
}
static graphStatus UniqueSortedKeysInferDataType(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, ge::DT_INT64);
    context->SetOutputDataType(1, ge::DT_INT32);
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class UniqueSortedKeys : public OpDef {
public:
    explicit UniqueSortedKeys(const char* name) : OpDef(name) {
        this->Input("keys").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND}).AutoContiguous();
        this->Output("ukeys").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND});
        this->Output("count").ParamType(REQUIRED).DataType({ge::DT_INT32}).Format({ge::FORMAT_ND});
        this->SetInferShape(ge::UniqueSortedKeysInferShape).SetInferDataType(ge::UniqueSortedKeysInferDataType);
        this->AICore().SetTiling(optiling::UniqueSortedKeysTilingFunc);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(UniqueSortedKeys);
}  // namespace ops
