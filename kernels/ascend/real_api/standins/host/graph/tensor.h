// mx_sparse stand-in for metadef's graph/tensor.h: ge::Shape as the asc-devkit tiling headers use it
// (AscendC::TensorShape). Declarations only.
#pragma once
#include "graph/types.h"
namespace ge {
class Shape {
public:
    Shape();
    explicit Shape(const std::vector<int64_t>& dims);
    size_t GetDimNum() const;
    int64_t GetDim(size_t idx) const;
    std::vector<int64_t> GetDims() const;
    int64_t GetShapeSize() const;
};
}  // namespace ge
