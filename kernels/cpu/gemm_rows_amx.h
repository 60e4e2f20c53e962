// bfloat16 gemm_rows on Intel AMX tiles (TDPBF16PS: bf16 products, float32 sums).
//
//   gemm_rows_amx: c[r][j] += sum_{p < cin} a[r][p] * W[k, g][p][j]   r < n, j < cout of the group
//
// Same contract as gemm_rows (gathered row pointers in, float accumulator rows
// out), for the bf16 gather_mm. The weight of every (offset, group) is re-laid
// once per call into the pair-interleaved ("VNNI") blocks a tile multiply reads;
// the gathered rows are copied 16 at a time into one A tile. Each output element
// is summed per 16-row block in a fixed order that depends only on the shapes,
// so results do not depend on the thread count.
#pragma once
#include <cstdint>
#include <vector>

namespace mxs {

// True when the CPU has AMX-BF16 and the kernel granted this process the tile
// state (Linux arch_prctl); MXS_DISABLE_AMX=1 in the environment turns it off.
bool amx_bf16_usable();

// Weights [K, cin_g, cout] (bf16 bits) of a grouped layer, re-laid per
// (k, group, 32-wide input chunk, 16-wide output block) as 1 KiB tile blocks.
class AmxWeights {
 public:
  AmxWeights(const uint16_t* w, int64_t kvol, int64_t groups, int64_t cin_g, int64_t cout_g);
  const uint16_t* block(int64_t k, int64_t g, int64_t kc, int64_t nb) const {
    return data_.data() + (((k * groups_ + g) * kchunks_ + kc) * nblocks_ + nb) * kBlockElems;
  }
  int64_t cin() const { return cin_; }
  int64_t cout() const { return cout_; }
  int64_t kchunks() const { return kchunks_; }
  int64_t nblocks() const { return nblocks_; }
  int64_t chunk_width() const { return chunk_width_; }  // bf16 input channels per tile multiply

  static constexpr int64_t kBlockElems = 16 * 32;

 private:
  int64_t groups_, cin_, cout_, kchunks_, nblocks_, chunk_width_;
  std::vector<uint16_t> data_;
};

// Per-thread buffers of gemm_rows_amx: one A tile of gathered rows and one
// 16 x 64 float tile of products on their way into the accumulator rows.
struct AmxScratch {
  explicit AmxScratch(const AmxWeights& w);
  std::vector<uint16_t> a;
  std::vector<float> c;
  alignas(64) uint8_t config[64];
};

void gemm_rows_amx(int64_t n, const uint16_t* const* a, const AmxWeights& w, int64_t k, int64_t g, float* const* c,
                   AmxScratch& s);

// dst[e] = src[e] rounded to bfloat16 (nearest even, NaN stays NaN): the same
// rounding as c10::BFloat16(float), 16 values per instruction sequence.
void round_to_bf16(const float* src, uint16_t* dst, int64_t n);

// The weight-gradient product on AMX, for up to kMaxPairs pairs:
//   D[i * ldd + j] += sum_{p < n} a[p][i] * g[p][j]     i < cin, j < cout
// The tile multiply sums over its K dimension, here the pairs, so the gathered
// input rows are transposed (channels x pairs) and the gradient rows
// interleaved two pairs at a time into per-thread buffers first.
class AmxPairsScratch {
 public:
  static constexpr int64_t kMaxPairs = 2048;
  // row stride of a_t: 64 bytes past 4 KiB, so that the rows written together
  // by the transpose do not all fall into one L1 set
  static constexpr int64_t kTransposedStride = kMaxPairs + 32;
  AmxPairsScratch(int64_t cin, int64_t cout);
  int64_t cin, cout, cin_pad, cout_pad;
  std::vector<uint16_t> a_t;   // [cin_pad][kTransposedStride]
  std::vector<uint16_t> g_vnni;  // [kMaxPairs / 2][cout_pad * 2]
  std::vector<float> d;        // [cin_pad][cout_pad]
  alignas(64) uint8_t config[64];
};

void gemm_tn_amx(int64_t n, const uint16_t* const* a, const uint16_t* const* g, float* D, int64_t ldd,
                 AmxPairsScratch& s);

}  // namespace mxs
