// mx_sparse stand-in for metadef's register/op_def_registry.h (CANN, not in the asc-devkit snapshot):
// the OpDef registration DSL and the gert tiling / InferShape / InferDataType contexts, as far as
// our op_host/*_cann.cpp glue uses them (names and signatures from CANN's documented custom-op
// API). Declarations only: the check type-checks the glue against these and against the real
// asc-devkit platform_ascendc.h / tiling_api.h; it links and runs nothing.
#pragma once
#include <cstdint>
#include <cstddef>
#include <vector>
#include "graph/types.h"
#include "register/tilingdata_base.h"
namespace fe { class PlatFormInfos; }
namespace gert {
class Shape {
public:
    size_t GetDimNum() const;
    int64_t GetDim(size_t idx) const;
    void SetDimNum(size_t n);
    void SetDim(size_t idx, int64_t v);
    int64_t GetShapeSize() const;
};
class StorageShape {
public:
    const Shape& GetOriginShape() const;
    const Shape& GetStorageShape() const;
};
class CompileTimeTensorDesc {
public:
    ge::DataType GetDataType() const;
    ge::Format GetOriginFormat() const;
    ge::Format GetStorageFormat() const;
};
class TilingData {
public:
    size_t GetCapacity() const;
    size_t GetDataSize() const;
    void SetDataSize(size_t size);
    void* GetData();
};
class ContinuousVector {
public:
    size_t GetSize() const;
    size_t GetCapacity() const;
    const void* GetData() const;
};
class TypedContinuousVector {
public:
    size_t GetSize() const;
    const void* GetData() const;
};
class RuntimeAttrs {
public:
    template <typename T> const T* GetAttrPointer(size_t idx) const;
    const TypedContinuousVector* GetListInt(size_t idx) const;
    const int64_t* GetInt(size_t idx) const;
    size_t GetAttrNum() const;
};
class TilingContext {
public:
    fe::PlatFormInfos* GetPlatformInfo() const;
    const StorageShape* GetInputShape(size_t idx) const;
    const StorageShape* GetOutputShape(size_t idx) const;
    const CompileTimeTensorDesc* GetInputDesc(size_t idx) const;
    const RuntimeAttrs* GetAttrs() const;
    TilingData* GetRawTilingData();
    ge::graphStatus SetBlockDim(uint32_t blockDim);
    ge::graphStatus SetTilingKey(uint64_t key);
    size_t* GetWorkspaceSizes(size_t num);
};
class InferShapeContext {
public:
    const Shape* GetInputShape(size_t idx) const;
    Shape* GetOutputShape(size_t idx);
    const RuntimeAttrs* GetAttrs() const;
};
class InferDataTypeContext {
public:
    ge::DataType GetInputDataType(size_t idx) const;
    ge::graphStatus SetOutputDataType(size_t idx, ge::DataType dt);
};
}  // namespace gert
namespace ops {
enum Option { IGNORE = 0, OPTIONAL = 1, REQUIRED = 2, DYNAMIC = 3, VIRTUAL = 4 };
class OpParamDef {
public:
    OpParamDef& ParamType(Option type);
    OpParamDef& DataType(std::vector<ge::DataType> types);
    OpParamDef& Format(std::vector<ge::Format> formats);
    OpParamDef& UnknownShapeFormat(std::vector<ge::Format> formats);
    OpParamDef& AutoContiguous();
    OpParamDef& IgnoreContiguous();
};
class OpAttrDef {
public:
    OpAttrDef& AttrType(Option type);
    OpAttrDef& Int();
    OpAttrDef& Int(int64_t v);
    OpAttrDef& ListInt();
    OpAttrDef& ListInt(std::vector<int64_t> v);
    OpAttrDef& Float();
    OpAttrDef& Float(float v);
    OpAttrDef& Bool();
    OpAttrDef& Bool(bool v);
};
using TilingKernelFunc = ge::graphStatus (*)(gert::TilingContext*);
using InferShapeKernelFunc = ge::graphStatus (*)(gert::InferShapeContext*);
using InferDataTypeKernelFunc = ge::graphStatus (*)(gert::InferDataTypeContext*);
class OpAICoreConfig;
class OpAICoreDef {
public:
    OpAICoreDef& SetTiling(TilingKernelFunc func);
    void AddConfig(const char* soc);
    void AddConfig(const char* soc, OpAICoreConfig& config);
};
class OpDef {
public:
    explicit OpDef(const char* type);
    OpParamDef& Input(const char* name);
    OpParamDef& Output(const char* name);
    OpAttrDef& Attr(const char* name);
    OpDef& SetInferShape(InferShapeKernelFunc func);
    OpDef& SetInferDataType(InferDataTypeKernelFunc func);
    OpAICoreDef& AICore();
};
template <class T> int AddOpDef(const char* name);
}  // namespace ops
#define OP_ADD(opType, ...) static int g_mxs_standin_##opType##_added = ::ops::AddOpDef<opType>(#opType)
