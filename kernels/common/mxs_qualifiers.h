// One qualifier macro so the same inline arithmetic compiles as plain C++ (CPU),
// as __host__ __device__ code under nvcc, and as __aicore__ code for AscendC.
#pragma once

#if defined(__CUDACC__)
#define MXS_INLINE __host__ __device__ __forceinline__
#elif defined(__CCE_KT_TEST__) || defined(__CCE_AICORE__) || defined(ASCENDC_CPU_DEBUG)
#define MXS_INLINE __aicore__ inline
#else
#define MXS_INLINE inline
#endif

#include <stdint.h>

namespace mxs {

// Largest spatial rank the neighbor-map builders support (1D..4D).
constexpr int kMaxSpatialDims = 4;

// Marks "no neighbor" in a neighbor map.
constexpr int32_t kNoNeighbor = -1;

}  // namespace mxs
