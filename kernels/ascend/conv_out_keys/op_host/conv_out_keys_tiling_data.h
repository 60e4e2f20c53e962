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
//
// Slots (the output layout, kernels/common/conv_rules.h conv_out_slots): along axis d, input
// coordinate c (u = c + p) reaches outputs only through the kernel positions kp with kp*dil = u
// (mod s): one residue class modulo step = s / gcd(s, dil), at most J_d = ceil(k / step) of them.
// Slot j of the axis is the class' j-th member kp_j = first + j*step, with output coordinate
// o_j = o_0 - j*(dil / gcd). first and o_0 come from q = floor(u / s), r = u mod s: the class member
// kp0 in [0, step) (if any) with kp0*dil mod s == r gives first = kp0 and o_0 = q - floor(kp0*dil / s).
#pragma once
#include <cstdint>

constexpr int32_t kCokMaxDims = 4;
constexpr int32_t kCokTerms = kCokMaxDims + 1;  // batch + spatial axes

struct ConvOutKeysTilingData {
    int64_t numVoxels;   // N input rows
    int64_t numTiles;    // ceil(N / tileRows)
    int32_t ndim;
    int32_t slotVol;     // J = prod(J_d): output rows per input row (the kernel volume K at stride 1)
    int32_t slotSum;     // sum of J_d (per-(axis, slot) terms kept in UB)
    int32_t tileRows;    // T input rows per tile (multiple of 64)
    int32_t kGroup;      // G slots staged per output DMA
    int32_t usedAiv;     // AIV-only launch: blockDim = usedAiv
    int32_t wide;        // 1: keys may reach 2^32, the high word is computed (else it is 0)
    int32_t ubBytes;     // total UB of the kernel's InitBuffer calls
    int32_t kernel[kCokMaxDims];
    int32_t stride[kCokMaxDims];
    int32_t padding[kCokMaxDims];
    int32_t dilation[kCokMaxDims];
    int32_t outShape[kCokMaxDims];
    float invStride[kCokMaxDims];            // 1/stride, for the float quotient estimate
    int32_t slots[kCokMaxDims];              // J_d
    int32_t latticeStep[kCokMaxDims];        // step = s / gcd(s, dil): kp_{j+1} - kp_j
    int32_t outStep[kCokMaxDims];            // dil / gcd(s, dil): o_j - o_{j+1}
    int32_t classes[kCokMaxDims];            // candidates kp0 = 0..classes-1 for first: min(k, step)
                                             //   (0 when stride or dilation is 1: first = 0 / first = r)
    int32_t dilModStride[kCokMaxDims];       // dil mod s, dil div s: kp0*dil mod s and div s,
    int32_t dilDivStride[kCokMaxDims];       //   stepped over kp0 without a division
    int32_t xBytes[kCokTerms];               // bytes of the largest x_t (1..3)
    int32_t loMul[kCokTerms];                // S_t mod 2^32 (as int32 bits)
    int32_t hiMul[kCokTerms][3];             // A_{t,i}
    int32_t lowByte[kCokTerms][3][4];        // byte j of B_{t,i}
};
