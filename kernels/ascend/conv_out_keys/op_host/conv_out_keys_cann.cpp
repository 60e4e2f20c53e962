// CANN glue of ConvOutKeys (NOT compiled here; see gather_mm_cann.cpp): OpDef, tiling registration,
// InferShape. Input indices int32 [N, 1 + ndim]; attrs spatial_shape, batch_size, kernel_size,
// stride, padding, dilation; output keys int64 [J * N] (slot-major, INT64_MAX where no output; J =
// ConvOutKeysSlotVolume, the kernel volume at stride 1).
// aclnnConvOutKeysGetWorkspaceSize(indices, spatial_shape, batch_size, kernel_size, stride, padding,
// dilation, keys, ...) / aclnnConvOutKeys, called by kernels/ascend/binding/mx_sparse_npu.cpp.
#include <cstring>
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "conv_out_keys_tiling.h"
#include "cann_tiling_store.h"

namespace optiling {
// ListInt attr i -> arr[0:n); false when its length is not n
static bool ReadList(const gert::RuntimeAttrs* attrs, int i, int64_t n, int64_t* arr) {
    const auto* v = attrs->GetAttrPointer<gert::ContinuousVector>(i);
    if (v == nullptr || (int64_t)v->GetSize() != n) return false;
    std::memcpy(arr, v->GetData(), n * sizeof(int64_t));
    return true;
}

static ge::graphStatus ConvOutKeysTilingFunc(gert::TilingContext* context) {
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    const mxs_ascend::AscendPlatform p{plat.GetCoreNumAic(), plat.GetCoreNumAiv(), ub};
    const auto idx = context->GetInputShape(0)->GetStorageShape();
    const auto* attrs = context->GetAttrs();
    mxs_ascend::ConvOutKeysShape s;
    s.numVoxels = idx.GetDim(0);
    s.ndim = (int32_t)idx.GetDim(1) - 1;
    s.batchSize = *attrs->GetAttrPointer<int64_t>(1);
    if (s.ndim < 1 || s.ndim > kCokMaxDims || !ReadList(attrs, 0, s.ndim, s.spatial) ||
        !ReadList(attrs, 2, s.ndim, s.kernel) || !ReadList(attrs, 3, s.ndim, s.stride) ||
        !ReadList(attrs, 4, s.ndim, s.padding) || !ReadList(attrs, 5, s.ndim, s.dilation))
        return ge::GRAPH_FAILED;
    ConvOutKeysTilingData t;
    if (mxs_ascend::ConvOutKeysTiling(s, p, t) != mxs_ascend::TILING_OK || t.usedAiv == 0) return ge::GRAPH_FAILED;
    if (!mxs_ascend::StoreTilingData(context, t)) return ge::GRAPH_FAILED;
    context->SetBlockDim(t.usedAiv);
    size_t* ws = context->GetWorkspaceSizes(1);
    ws[0] = 32;
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static graphStatus ConvOutKeysInferShape(gert::InferShapeContext* context) {
    const auto* attrs = context->GetAttrs();
    const auto* kernel = attrs->GetAttrPointer<gert::ContinuousVector>(2);
    const auto* stride = attrs->GetAttrPointer<gert::ContinuousVector>(3);
    const auto* dilation = attrs->GetAttrPointer<gert::ContinuousVector>(5);
    const size_t nd = kernel->GetSize();
    if (nd < 1 || nd > (size_t)kCokMaxDims || stride->GetSize() != nd || dilation->GetSize() != nd)
        return GRAPH_FAILED;
    const auto* k = static_cast<const int64_t*>(kernel->GetData());
    const auto* s = static_cast<const int64_t*>(stride->GetData());
    const auto* dl = static_cast<const int64_t*>(dilation->GetData());
    for (size_t d = 0; d < nd; ++d)
        if (s[d] < 1 || dl[d] < 1) return GRAPH_FAILED;
    gert::Shape* out = context->GetOutputShape(0);
    out->SetDimNum(1);
    out->SetDim(0, context->GetInputShape(0)->GetDim(0) * mxs_ascend::ConvOutKeysSlotVolume((int32_t)nd, k, s, dl));
    return GRAPH_SUCCESS;
}
static graphStatus ConvOutKeysInferDataType(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, ge::DT_INT64);
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class ConvOutKeys : public OpDef {
public:
    explicit ConvOutKeys(const char* name) : OpDef(name) {
        this->Input("indices").ParamType(REQUIRED).DataType({ge::DT_INT32}).Format({ge::FORMAT_ND}).AutoContiguous();
        this->Output("keys").ParamType(REQUIRED).DataType({ge::DT_INT64}).Format({ge::FORMAT_ND});
        this->Attr("spatial_shape").AttrType(REQUIRED).ListInt();
        this->Attr("batch_size").AttrType(REQUIRED).Int();
        this->Attr("kernel_size").AttrType(REQUIRED).ListInt();
        this->Attr("stride").AttrType(REQUIRED).ListInt();
        this->Attr("padding").AttrType(REQUIRED).ListInt();
        this->Attr("dilation").AttrType(REQUIRED).ListInt();
        this->SetInferShape(ge::ConvOutKeysInferShape).SetInferDataType(ge::ConvOutKeysInferDataType);
        this->AICore().SetTiling(optiling::ConvOutKeysTilingFunc);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(ConvOutKeys);
}  // namespace ops
