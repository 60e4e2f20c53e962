// CANN glue of GatherMm: OpDef registration, tiling registration, InferShape/InferDataType.
// Compiled only inside a CANN custom-op project (needs the CANN toolkit headers); NOT compiled or
// run in this repository -- the tiling it calls (GatherMmTiling) is plain C++ and unit-tested in
// tests/ascend/test_tiling.py, the kernel is tested in the emulator.
// aclnn API generated from this OpDef: aclnnGatherMmGetWorkspaceSize(features, weight, nbr, weight_layout,
// out, ...) / aclnnGatherMm(workspace, size, executor, stream), called by kernels/ascend/binding/mx_sparse_npu.cpp.
// weight_layout (gather_mm_weight_layout.h): 0 = weight [K, Cin, Cout]; 1 / 2 = a layer's [K, Cout, Cin]
// read transposed, offsets in order / reversed (the input gradient without a transposed copy): the
// output's Cout is then the weight's dim 1, and the tiling key selects the kernel's ISTRANS instantiation.
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "gather_mm_tiling.h"
#include "cann_tiling_store.h"

namespace optiling {
static ge::graphStatus GatherMmTilingFunc(gert::TilingContext* context) {
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    const mxs_ascend::AscendPlatform p{plat.GetCoreNumAic(), plat.GetCoreNumAiv(), ub};
    const auto feat = context->GetInputShape(0)->GetStorageShape();
    const auto w = context->GetInputShape(1)->GetStorageShape();
    const auto nbr = context->GetInputShape(2)->GetStorageShape();
    const ge::DataType dt = context->GetInputDesc(0)->GetDataType();
    const int64_t layout = *context->GetAttrs()->GetAttrPointer<int64_t>(0);
    if (layout != mxs_ascend::GMM_WEIGHT_AS_IS && !mxs_ascend::GatherMmWeightTransposed(layout)) return ge::GRAPH_FAILED;
    const bool weightT = mxs_ascend::GatherMmWeightTransposed(layout);
    mxs_ascend::GatherMmShape s;
    s.numIn = feat.GetDim(0); s.cin = feat.GetDim(1);
    s.kvol = w.GetDim(0); s.cout = w.GetDim(weightT ? 1 : 2);
    s.weightLayout = (int32_t)layout;
    s.numOut = nbr.GetDim(0);
    s.dtypeKey = dt == ge::DT_FLOAT ? mxs_ascend::DT_KEY_FP32 : dt == ge::DT_FLOAT16 ? mxs_ascend::DT_KEY_FP16
                                                                                      : mxs_ascend::DT_KEY_BF16;
    GatherMmTilingData t;
    if (mxs_ascend::GatherMmTiling(s, p, t) != mxs_ascend::TILING_OK || t.usedAiv == 0) return ge::GRAPH_FAILED;
    // Matmul tiling from the library (fills base/step/depth fields of the TCubeTiling)
    matmul_tiling::MatmulApiTiling mm(plat);
    const auto mdt = dt == ge::DT_FLOAT ? matmul_tiling::DataType::DT_FLOAT
                     : dt == ge::DT_FLOAT16 ? matmul_tiling::DataType::DT_FLOAT16 : matmul_tiling::DataType::DT_BF16;
    mm.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mdt);
    mm.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, mdt, weightT);
    // fp16/bf16 with the weight read transposed: C is the fp32 tile of sums (t.accOffset)
    mm.SetCType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND,
                t.accOffset > 0 ? matmul_tiling::DataType::DT_FLOAT : mdt);
    mm.SetBiasType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, matmul_tiling::DataType::DT_FLOAT);
    // K of one Matmul: a k-group of offsets, or one offset whose A rows keep the k-group's pitch
    mm.SetShape(t.tileRows, t.cout, t.mm.singleCoreK);
    mm.SetOrgShape(t.tileRows, t.cout, t.mm.Ka, t.mm.Kb);
    mm.SetBias(false);
    mm.SetBufferSpace(-1, -1, -1);
    // the plain-struct overload fills t.mm (kernel_tiling.h's TCubeTiling) directly
    if (mm.GetTiling(t.mm) == -1) return ge::GRAPH_FAILED;
    if (!mxs_ascend::StoreTilingData(context, t)) return ge::GRAPH_FAILED;
    context->SetBlockDim(t.blockDim);
    context->SetTilingKey(t.tilingKey);
    size_t* ws = context->GetWorkspaceSizes(1);
    ws[0] = plat.GetLibApiWorkSpaceSize() + (mxs_ascend::GatherMmWorkspaceBytes(t) - mxs_ascend::kSysWorkspace);
    return ge::GRAPH_SUCCESS;
}
}  // namespace optiling

namespace ge {
static graphStatus GatherMmInferShape(gert::InferShapeContext* context) {
    const gert::Shape* nbr = context->GetInputShape(2);
    const gert::Shape* w = context->GetInputShape(1);
    const int64_t layout = *context->GetAttrs()->GetAttrPointer<int64_t>(0);
    gert::Shape* out = context->GetOutputShape(0);
    out->SetDimNum(2);
    out->SetDim(0, nbr->GetDim(0));
    out->SetDim(1, w->GetDim(mxs_ascend::GatherMmWeightTransposed(layout) ? 1 : 2));
    return GRAPH_SUCCESS;
}
static graphStatus GatherMmInferDataType(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, context->GetInputDataType(0));
    return GRAPH_SUCCESS;
}
}  // namespace ge

namespace ops {
class GatherMm : public OpDef {
public:
    explicit GatherMm(const char* name) : OpDef(name) {
        this->Input("features").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Input("weight").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Input("nbr").ParamType(REQUIRED).DataType({ge::DT_INT32, ge::DT_INT32, ge::DT_INT32})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}).AutoContiguous();
        this->Attr("weight_layout").AttrType(REQUIRED).Int();
        this->Output("out").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->SetInferShape(ge::GatherMmInferShape).SetInferDataType(ge::GatherMmInferDataType);
        this->AICore().SetTiling(optiling::GatherMmTilingFunc);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");
    }
};
OP_ADD(GatherMm);
}  // namespace ops
