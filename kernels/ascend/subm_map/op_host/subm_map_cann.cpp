// CANN glue of SubmMap, the sorted-key neighbour lookup behind both map builders (type-checked only,
// see gather_mm_cann.cpp). Inputs: qkeys int64 [M], ckeys int64 [N], deltas int64 [K]; attrs
// group_size (offsets sharing one staged key range), key_bound (every key lies in [0, key_bound): the
// caller's batch * prod(padded grid); 0 = unknown -> exact two-word compares); output nbrs int32 [M, K].
// aclnnSubmMapGetWorkspaceSize(qkeys, ckeys, deltas, group_size, key_bound, nbrs, ...) / aclnnSubmMap.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "subm_map_tiling.h"
#include "cann_tiling_store.h"

namespace optiling {
static ge::graphStatus SubmMapTilingFunc(gert::TilingContext* context) {
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    const mxs_ascend::AscendPlatform p{plat.GetCoreNumAic(), plat.GetCoreNumAiv(), ub};
    const auto* attrs = context->GetAttrs();
    const int64_t group = *attrs->GetAttrPointer<int64_t>(0);
    const int64_t keyBound = *attrs->GetAttrPointer<int64_t>(1);
    mxs_ascend::SubmMapShape s;
    s.numVoxels = context->GetInputShape(0)->GetStorageShape().GetDim(0);
    s.numCand = context->GetInputShape(1)->GetStorageShape().GetDim(0);
    const int64_t kvol = context->GetInputShape(2)->GetStorageShape().GetDim(0);
    // the deltas are precomputed by the caller; the tiling only needs K and the last-axis group
    s.ndim = 2; s.kernel[0] = kvol / group; s.kernel[1] = group;
    s.paddedShape[0] = s.paddedShape[1] = 1;
    s.keyBound = keyBound;
    SubmMapTilingData t;
    if (mxs_ascend::SubmMapTiling(s, p, t) != mxs_ascend::TILING_OK || t.usedAiv == 0) return ge::GRAPH_FAILED;
    if (!mxs_ascend::StoreTilingData(context, t)) return ge::GRAPH_FAILED;
    context->SetBlockDim(t.usedAiv);
    size_t* ws = context->GetWorkspaceSizes(1);
    ws[0] = 32;
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static graphStatus SubmMapInferShape(gert::InferShapeContext* context) {
    gert::Shape* out = context->GetOutputShape(0);
    out->SetDimNum(2);
    out->SetDim(0, context->GetInputShape(0)->GetDim(0));
    out->SetDim(1, context->GetInputShape(2)->GetDim(0));
    return GRAPH_SUCCESS;
}
static graphStatus SubmMapInferDataType(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, ge::DT_INT32);
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class SubmMap : public OpDef {
public:
    explicit SubmMap(const char* name) : OpDef(name) {
        this->Input("qkeys").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND});
        this->Input("ckeys").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND});
        this->Input("deltas").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND});
        this->Output("nbrs").ParamType(REQUIRED).DataType({ge::DT_INT32}).Format({ge::FORMAT_ND});
        this->Attr("group_size").AttrType(REQUIRED).Int();
        this->Attr("key_bound").AttrType(REQUIRED).Int();
        this->SetInferShape(ge::SubmMapInferShape).SetInferDataType(ge::SubmMapInferDataType);
        this->AICore().SetTiling(optiling::SubmMapTilingFunc);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(SubmMap);
}  // namespace ops
