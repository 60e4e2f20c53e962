// mx_sparse stand-in for metadef's graph/types.h (CANN, not in the asc-devkit snapshot), for the
// host half of kernels/ascend/real_api/real_api_check.py: the ge enums and status codes that the
// asc-devkit tiling headers and our op_host/*_cann.cpp glue name. Declarations only; enum values
// are placeholders (only the names matter to a type check).
#pragma once
#include <cstdint>
#include <string>
#include <vector>
namespace ge {
enum DataType { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6, DT_UINT16 = 7,
                DT_UINT32 = 8, DT_INT64 = 9, DT_UINT64 = 10, DT_DOUBLE = 11, DT_BOOL = 12, DT_BF16 = 27, DT_UNDEFINED = 28 };
enum Format { FORMAT_NCHW = 0, FORMAT_NHWC = 1, FORMAT_ND = 2, FORMAT_NC1HWC0 = 3, FORMAT_FRACTAL_Z = 4, FORMAT_FRACTAL_NZ = 29 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge
