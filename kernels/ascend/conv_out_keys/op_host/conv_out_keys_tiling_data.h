// Tiling data of the strided-conv output-key kernel (ConvOutKeys), shared by host and device.
//
// The key of output voxel (b, o_0 .. o_{nd-1}) is the row-major index
//   key = sum_t x_t * S_t,  x = (b, o_0, ..., o_{nd-1}),  S = (prod(out), prod(out[1:]), ..., 1)
// (kernels/common/coord_pack.h on the output grid). "Terms" t = 0 (batch) .. nd (last axis).
// Every x_t < 2^24, so the kernel splits it into at most three bytes x_{t,i} and the host gives,
// per (t, i), 256^i * S_t = A_{t,i} * 2^32 + B_{t,i}:
//   low word  = sum_t x_t * (S_t mod 2^32)                        (int32 wrapping arithmetic)
//   high word = sum_{t,i} x_{t,i} * A_{t,i} + carry,  carry = floor(sum_{t,i} x_{t,i} * B_{t,i} / 2^32)
// and the carry is a byte-column chain over the bytes of B (all column sums < 2^20: exact in float).
#pragma once
#include <cstdint>

constexpr int32_t kCokMaxDims = 4;
constexpr int32_t kCokTerms = kCokMaxDims + 1;  // batch + spatial axes

struct ConvOutKeysTilingData {
    int64_t numVoxels;   // N input rows
    int64_t numTiles;    // ceil(N / tileRows)
    int32_t ndim;
    int32_t kvol;        // K
    int32_t kernelSum;   // sum of kernel sizes (per-axis terms kept in UB)
    int32_t tileRows;    // T input rows per tile (multiple of 64)
    int32_t kGroup;      // G offsets staged per output DMA
    int32_t usedAiv;     // AIV-only launch: blockDim = usedAiv
    int32_t wide;        // 1: keys may reach 2^32, the high word is computed (else it is 0)
    int32_t ubBytes;     // total UB of the kernel's InitBuffer calls
    int32_t kernel[kCokMaxDims];
    int32_t stride[kCokMaxDims];
    int32_t padding[kCokMaxDims];
    int32_t dilation[kCokMaxDims];
    int32_t outShape[kCokMaxDims];
    float invStride[kCokMaxDims];            // 1/stride, for the float quotient estimate
    int32_t xBytes[kCokTerms];               // bytes of the largest x_t (1..3)
    int32_t loMul[kCokTerms];                // S_t mod 2^32 (as int32 bits)
    int32_t hiMul[kCokTerms][3];             // A_{t,i}
    int32_t lowByte[kCokTerms][3][4];        // byte j of B_{t,i}
};
