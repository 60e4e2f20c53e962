// mx_sparse stand-in for metadef's register/tilingdata_base.h: the BEGIN_TILING_DATA_DEF /
// TILING_DATA_FIELD_DEF* macros that the asc-devkit *_tilingdata.h headers use to declare
// optiling::TCubeTiling and friends, each field with its set_/get_ accessors, and the TilingDef
// base (SaveToBuffer, GetDataSize). Declarations only.
#pragma once
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <map>
#include "graph/types.h"
namespace optiling {
class TilingDef {
public:
    virtual ~TilingDef() = default;
    void SaveToBuffer(void* pdata, size_t capacity);
    size_t GetDataSize() const;
    const char* GetTilingClassName() const;
    std::vector<std::string> GetFieldInfo() const;
};
}  // namespace optiling
#define BEGIN_TILING_DATA_DEF(class_name) \
    class class_name : public TilingDef { \
    public:
#define TILING_DATA_FIELD_DEF(data_type, field_name) \
    void set_##field_name(data_type v);              \
    data_type get_##field_name() const;              \
    data_type field_name;
#define TILING_DATA_FIELD_DEF_ARR(arr_type, arr_size, field_name) \
    void set_##field_name(const arr_type* v);                     \
    const arr_type* get_##field_name() const;                     \
    arr_type field_name[arr_size];
#define TILING_DATA_FIELD_DEF_STRUCT(struct_type, field_name) struct_type field_name;
#define END_TILING_DATA_DEF };
#define REGISTER_TILING_DATA_CLASS(op_type, class_name)
