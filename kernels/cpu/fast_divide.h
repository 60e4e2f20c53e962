// Division of non-negative int64 values by a divisor fixed at run time, without
// the integer divide instruction (tens of cycles, unpipelined) on the map
// builders' per-voxel paths: the quotient is estimated with one double multiply
// and corrected by at most one step. The estimate is off by less than one while
// the dividend stays below 2^52 (the double's rounding error times the
// dividend); larger dividends take the exact integer division.
#pragma once
#include <cstdint>

namespace mxs {

class FastDivisor {
 public:
  FastDivisor() = default;
  explicit FastDivisor(int64_t d) : d_(d), inv_(1.0 / static_cast<double>(d)) {}

  int64_t divisor() const { return d_; }

  // x / d for 0 <= x; *rem = x % d.
  int64_t divide(int64_t x, int64_t* rem) const {
    if (x >= kExactLimit) {
      *rem = x % d_;
      return x / d_;
    }
    int64_t q = static_cast<int64_t>(static_cast<double>(x) * inv_);
    int64_t r = x - q * d_;
    if (r < 0) {
      --q;
      r += d_;
    } else if (r >= d_) {
      ++q;
      r -= d_;
    }
    *rem = r;
    return q;
  }

 private:
  static constexpr int64_t kExactLimit = int64_t(1) << 52;
  int64_t d_ = 1;
  double inv_ = 1.0;
};

}  // namespace mxs
