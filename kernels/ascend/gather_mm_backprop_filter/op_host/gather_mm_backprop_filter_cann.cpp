// CANN glue of GatherMmBackpropFilter (NOT compiled here; see gather_mm_cann.cpp for the conventions).
// aclnnGatherMmBackpropFilterGetWorkspaceSize(features, grad, nbr, dw, ...) / aclnnGatherMmBackpropFilter.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "gather_mm_backprop_filter_tiling.h"
#include "cann_tiling_store.h"

namespace optiling {
static ge::graphStatus GatherMmBpfTilingFunc(gert::TilingContext* context) {
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    const mxs_ascend::AscendPlatform p{plat.GetCoreNumAic(), plat.GetCoreNumAiv(), ub};
    const auto feat = context->GetInputShape(0)->GetStorageShape();
    const auto grad = context->GetInputShape(1)->GetStorageShape();
    const auto nbr = context->GetInputShape(2)->GetStorageShape();
    const ge::DataType dt = context->GetInputDesc(0)->GetDataType();
    mxs_ascend::GatherMmBpfShape s;
    s.numIn = feat.GetDim(0); s.cin = feat.GetDim(1);
    s.numOut = nbr.GetDim(0); s.kvol = nbr.GetDim(1); s.cout = grad.GetDim(1);
    s.dtypeKey = dt == ge::DT_FLOAT ? mxs_ascend::DT_KEY_FP32 : dt == ge::DT_FLOAT16 ? mxs_ascend::DT_KEY_FP16
                                                                                      : mxs_ascend::DT_KEY_BF16;
    GatherMmBpfTilingData t;
    if (mxs_ascend::GatherMmBpfTiling(s, p, t) != mxs_ascend::TILING_OK || t.usedAiv == 0) return ge::GRAPH_FAILED;
    matmul_tiling::MatmulApiTiling mm(plat);
    const auto mdt = dt == ge::DT_FLOAT ? matmul_tiling::DataType::DT_FLOAT
                     : dt == ge::DT_FLOAT16 ? matmul_tiling::DataType::DT_FLOAT16 : matmul_tiling::DataType::DT_BF16;
    mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mdt, true);  // slab^T
    mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mdt);
    mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, matmul_tiling::DataType::DT_FLOAT);
    mm.SetBiasType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, matmul_tiling::DataType::DT_FLOAT);
    mm.SetShape(t.kGroup * t.cin, t.cout, t.tileRows);
    mm.SetOrgShape(t.kGroup * t.cin, t.cout, t.tileRows);
    mm.SetBias(false);
    mm.SetBufferSpace(-1, -1, -1);
    // the plain-struct overload fills t.mm (kernel_tiling.h's TCubeTiling) directly
    if (mm.GetTiling(t.mm) == -1) return ge::GRAPH_FAILED;
    if (!mxs_ascend::StoreTilingData(context, t)) return ge::GRAPH_FAILED;
    context->SetBlockDim(t.blockDim);
    if (mxs_ascend::RequestAllCoresAtOnce(context) != ge::GRAPH_SUCCESS) return ge::GRAPH_FAILED;  // SyncAll
    context->SetTilingKey(t.dtypeKey);
    size_t* ws = context->GetWorkspaceSizes(1);
    ws[0] = plat.GetLibApiWorkSpaceSize() + (mxs_ascend::GatherMmBpfWorkspaceBytes(t) - mxs_ascend::kSysWorkspace);
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static graphStatus GatherMmBpfInferShape(gert::InferShapeContext* context) {
    const gert::Shape* feat = context->GetInputShape(0);
    const gert::Shape* grad = context->GetInputShape(1);
    const gert::Shape* nbr = context->GetInputShape(2);
    gert::Shape* dw = context->GetOutputShape(0);
    dw->SetDimNum(3);
    dw->SetDim(0, nbr->GetDim(1));
    dw->SetDim(1, feat->GetDim(1));
    dw->SetDim(2, grad->GetDim(1));
    return GRAPH_SUCCESS;
}
static graphStatus GatherMmBpfInferDataType(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, context->GetInputDataType(0));
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class GatherMmBackpropFilter : public OpDef {
public:
    explicit GatherMmBackpropFilter(const char* name) : OpDef(name) {
        this->Input("features").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Input("grad").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Input("nbr").ParamType(REQUIRED).DataType({ge::DT_INT32, ge::DT_INT32, ge::DT_INT32})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Output("dw").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->SetInferShape(ge::GatherMmBpfInferShape).SetInferDataType(ge::GatherMmBpfInferDataType);
        this->AICore().SetTiling(optiling::GatherMmBpfTilingFunc);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(GatherMmBackpropFilter);
}  // namespace ops
