#include "large_tensor_pool.h"

#include "env_switch.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace mxs {
namespace {

// Smaller tensors stay with torch's allocator, among the small objects (on the KITTI-like
// SECOND step, 256 KiB left about 1 MB less resident than 1 MiB).
constexpr size_t kPooledMinBytes = size_t(256) << 10;
// Ranges are multiples of this, so that neighbouring sizes merge into reusable holes.
constexpr size_t kGrain = size_t(64) << 10;
// Address space is reserved in segments sized from need: the first 64 MiB (or the request),
// each later one as large as all before it together (the reservation doubles), at most 1 GiB
// (larger requests get a segment of their own size). Pages are committed only when touched
// (MAP_NORESERVE), but reserved address space counts against `ulimit -v`: a fixed 1 GiB
// segment for a 43 MB step left a 2 GB limit too little room for torch's own allocations.
constexpr size_t kFirstSegmentBytes = size_t(64) << 20;
constexpr size_t kSegmentBytes = size_t(1) << 30;
constexpr int64_t kDefaultKeepLimit = int64_t(256) << 20;

size_t round_up(size_t n, size_t step) { return (n + step - 1) / step * step; }

bool pool_enabled() {
#ifdef __linux__
  static const bool enabled = env_switch("MXS_CPU_POOL", true);
  return enabled;
#else
  return false;  // built on mmap; elsewhere torch's allocator serves every tensor
#endif
}

int64_t initial_keep_limit() {
  const char* v = std::getenv("MXS_CPU_POOL_KEEP_MB");
  if (v == nullptr || *v == '\0') return kDefaultKeepLimit;
  char* end = nullptr;
  const long long mb = std::strtoll(v, &end, 10);
  TORCH_CHECK_VALUE(end != v && *end == '\0' && mb >= 0,
                    "MXS_CPU_POOL_KEEP_MB: expected a non-negative integer (MiB), got '", v, "'");
  return int64_t(mb) << 20;
}

// One reserved address range. `free` maps offset -> length of each free range, in address
// order, neighbours always merged; everything below `touched` may be resident.
struct Segment {
  char* base;
  size_t size;
  std::map<size_t, size_t> free;
  size_t touched = 0;
  size_t live = 0;
};

// What a tensor's DataPtr carries back to the pool.
struct Range {
  Segment* segment;
  size_t offset, bytes;
};

#ifdef __linux__
// A segment of the usual size is address space only (MAP_NORESERVE: pages count when
// touched). A request larger than that gets a segment the kernel accounts for in full, as
// malloc's would be, so that one the machine cannot hold fails here (an exception) instead
// of being granted and then killing the process when its pages are touched.
char* reserve(size_t bytes) {
  const int lazy = bytes <= kSegmentBytes ? MAP_NORESERVE : 0;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | lazy, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}
void unreserve(char* p, size_t bytes) { munmap(p, bytes); }
void discard_pages(char* p, size_t bytes) { madvise(p, bytes, MADV_DONTNEED); }
#else
char* reserve(size_t) { return nullptr; }
void unreserve(char*, size_t) {}
void discard_pages(char*, size_t) {}
#endif

class LargeTensorPool final : public c10::Allocator {
 public:
  static LargeTensorPool& instance() {
    static LargeTensorPool* pool = new LargeTensorPool();  // never destroyed: tensors may outlive statics
    return *pool;
  }

  c10::DataPtr allocate(size_t n) override {
    if (n < kPooledMinBytes) return c10::GetDefaultCPUAllocator()->allocate(n);
    Range* r = take(round_up(n, kGrain));
    return {r->segment->base + r->offset, r, &LargeTensorPool::release, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const /* override (torch >= 2.3) */ {
    std::memcpy(dest, src, count);
  }

  LargeTensorPoolStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    LargeTensorPoolStats s;
    for (const Segment* g : segments_) {
      s.live_bytes += int64_t(g->live);
      s.touched_bytes += int64_t(g->touched);
      s.reserved_bytes += int64_t(g->size);
    }
    s.kept_bytes = kept_;
    s.peak_live_bytes = peak_live_;
    s.segments = int64_t(segments_.size());
    return s;
  }

  void set_keep_limit(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    keep_limit_ = bytes;
    if (kept_ > keep_limit_) trim_locked();
  }

  int64_t keep_limit() {
    std::lock_guard<std::mutex> lock(mutex_);
    return keep_limit_;
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    trim_locked();
  }

 private:
  LargeTensorPool() : keep_limit_(initial_keep_limit()) {}

  // First fit at the lowest address, over the segments in the order they were reserved:
  // low addresses are reused first, so the touched part of each segment stays small.
  Range* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Segment* g : segments_)
      if (Range* r = take_from(g, bytes)) return r;
    Segment* g = new_segment(bytes);
    return take_from(g, bytes);
  }

  Range* take_from(Segment* g, size_t bytes) {
    for (auto it = g->free.begin(); it != g->free.end(); ++it) {
      if (it->second < bytes) continue;
      const size_t offset = it->first, rest = it->second - bytes;
      g->free.erase(it);
      if (rest > 0) g->free.emplace(offset + bytes, rest);
      // the part below the touched mark reuses kept pages (an estimate: some may have been discarded)
      const size_t reused = offset < g->touched ? std::min(offset + bytes, g->touched) - offset : 0;
      kept_ -= std::min(kept_, int64_t(reused));
      g->touched = std::max(g->touched, offset + bytes);
      g->live += bytes;
      live_ += bytes;
      peak_live_ = std::max(peak_live_, live_);
      return new Range{g, offset, bytes};
    }
    return nullptr;
  }

  // The size of the next segment for a request of `bytes` (see kFirstSegmentBytes).
  size_t next_segment_size(size_t bytes) const {
    size_t reserved = 0;
    for (const Segment* g : segments_) reserved += g->size;
    return std::max(std::clamp(reserved, kFirstSegmentBytes, kSegmentBytes), round_up(bytes, kGrain));
  }

  Segment* new_segment(size_t bytes) {
    size_t size = next_segment_size(bytes);
    char* base = reserve(size);
    if (base == nullptr) {  // strict overcommit or an address-space limit: just what is asked
      trim_locked();
      size = bytes;
      base = reserve(size);
    }
    TORCH_CHECK(base != nullptr, "mx_sparse: cannot reserve ", size, " bytes of address space for a CPU tensor of ",
                bytes, " bytes (out of memory, or an address-space limit such as ulimit -v)");
    Segment* g = new Segment{base, size, {{0, size}}};
    segments_.push_back(g);
    return g;
  }

  static void release(void* ctx) {
    Range* r = static_cast<Range*>(ctx);
    LargeTensorPool& pool = instance();
    std::lock_guard<std::mutex> lock(pool.mutex_);
    give_back(r->segment, r->offset, r->bytes);
    pool.live_ -= r->bytes;
    pool.kept_ += int64_t(r->bytes);
    delete r;
    if (pool.kept_ > pool.keep_limit_) pool.trim_locked();
  }

  static void give_back(Segment* g, size_t offset, size_t bytes) {
    g->live -= bytes;
    auto next = g->free.lower_bound(offset);
    if (next != g->free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = g->free.erase(next);
    }
    if (next != g->free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    g->free.emplace_hint(next, offset, bytes);
  }

  // Discards the pages of every free range below each segment's touched mark, lowers the
  // mark to the end of the last live range, and unreserves segments (but the first) that
  // hold nothing.
  void trim_locked() {
    std::vector<Segment*> kept;
    for (size_t i = 0; i < segments_.size(); ++i) {
      Segment* g = segments_[i];
      if (g->live == 0 && i > 0) {
        unreserve(g->base, g->size);
        delete g;
        continue;
      }
      for (const auto& [offset, length] : g->free)
        if (offset < g->touched) discard_pages(g->base + offset, std::min(length, g->touched - offset));
      const auto last = g->free.empty() ? g->free.end() : std::prev(g->free.end());
      g->touched = (last != g->free.end() && last->first + last->second == g->size) ? last->first : g->size;
      kept.push_back(g);
    }
    segments_.swap(kept);
    kept_ = 0;
    peak_live_ = live_;
  }

  std::mutex mutex_;
  std::vector<Segment*> segments_;
  int64_t keep_limit_;
  int64_t kept_ = 0;  // bytes freed since the last trim and not reused since (resident, roughly)
  size_t live_ = 0, peak_live_ = 0;  // peak since the last trim (release_cached or the keep limit)
};

}  // namespace

at::Tensor empty_cpu(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (!pool_enabled()) return at::empty(sizes, options);
  return at::detail::empty_generic(sizes, &LargeTensorPool::instance(), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   options.dtype().toScalarType(), std::nullopt);
}

at::Tensor empty_like_cpu(const at::Tensor& like) { return empty_cpu(like.sizes(), like.options()); }

LargeTensorPoolStats large_tensor_pool_stats() { return LargeTensorPool::instance().stats(); }
void large_tensor_pool_release_cached() { LargeTensorPool::instance().release_cached(); }
void large_tensor_pool_set_keep_limit(int64_t bytes) {
  TORCH_CHECK_VALUE(bytes >= 0, "keep_limit: expected a non-negative number of bytes, got ", bytes);
  LargeTensorPool::instance().set_keep_limit(bytes);
}
int64_t large_tensor_pool_keep_limit() { return LargeTensorPool::instance().keep_limit(); }

}  // namespace mxs
