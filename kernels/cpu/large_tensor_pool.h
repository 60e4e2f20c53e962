// Memory for the large tensors the CPU kernels return (features, gradients, maps).
//
// Why not torch's allocator: glibc serves these from its main heap, where the small
// objects Python and autograd allocate between them split the holes large tensors leave
// behind; a later tensor of the same size then no longer fits and the heap grows. A
// training step touched about twice the memory it ever held live at once. Here large
// tensors are carved from their own reserved address range (first fit, lowest address,
// freed neighbours merged), so only large tensors share it and the pages a step touches
// stay close to what it holds at its peak. Freed ranges keep their pages for the next
// step (a training step repeats its sizes, and fresh pages cost a page fault each) until
// the kept bytes pass a limit; then the free ranges' pages go back to the system.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace mxs {

struct LargeTensorPoolStats {
  int64_t live_bytes = 0;     // held by tensors now
  int64_t peak_live_bytes = 0;  // the most held at once since the last release (or automatic trim)
  int64_t kept_bytes = 0;     // freed and not yet given back (an estimate of resident free pages)
  int64_t touched_bytes = 0;  // below the segments' marks: every page a tensor used since the last trim
  int64_t reserved_bytes = 0; // address space reserved (not memory)
  int64_t segments = 0;
};

// An uninitialised CPU tensor; from the pool when it is large and the pool is enabled
// (Linux; MXS_CPU_POOL=0 turns it off), else from torch's CPU allocator.
at::Tensor empty_cpu(at::IntArrayRef sizes, const at::TensorOptions& options);
at::Tensor empty_like_cpu(const at::Tensor& like);

LargeTensorPoolStats large_tensor_pool_stats();
// Gives the free ranges' pages back to the system (like torch.cuda.empty_cache()).
void large_tensor_pool_release_cached();
// The bound on kept bytes (default 256 MiB, or MXS_CPU_POOL_KEEP_MB); 0 gives pages back at every free.
void large_tensor_pool_set_keep_limit(int64_t bytes);
int64_t large_tensor_pool_keep_limit();

}  // namespace mxs
