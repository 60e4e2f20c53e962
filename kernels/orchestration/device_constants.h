// Small constant tensors of the accelerator map builders (key weights, key deltas, the absent-row
// entry): functions of a layer's configuration and grid, which repeat every training step, so each
// is made once per device by a few fills (no host-to-device copy) and only read afterwards.
// Under a fake-tensor trace (or on meta tensors) a constant is made afresh: a fake tensor is no
// constant. Made outside inference mode, so that it is usable outside it.
#pragma once
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mxs {

inline bool making_fake_tensors(const c10::Device& device) {
  return device.is_meta() ||
         c10::impl::TorchDispatchModeTLS::get_mode(c10::impl::TorchDispatchModeKey::FAKE).has_value();
}

struct ConstantStore {
  std::mutex lock;
  std::unordered_map<std::string, at::Tensor> kept;
};

// One store for every caller; never destroyed: device memory must not be freed after the device
// runtime has shut down.
inline ConstantStore& constant_store() {
  static auto* store = new ConstantStore();
  return *store;
}

// make() kept under (key, device). A few entries per network; emptied if it ever holds 1024.
// The lock is not held while make() runs: it runs operators, and under a Python dispatch mode
// those run Python, where another thread may take the GIL and come here.
template <class Make>
at::Tensor device_constant(const std::string& key, const c10::Device& device, Make make) {
  if (making_fake_tensors(device)) return make();
  ConstantStore& store = constant_store();
  const std::string full = key + "@" + device.str();
  {
    const std::lock_guard<std::mutex> guard(store.lock);
    const auto found = store.kept.find(full);
    if (found != store.kept.end()) return found->second;
  }
  at::Tensor made;
  {
    const c10::InferenceMode normal_tensors(false);
    made = make();
  }
  const std::lock_guard<std::mutex> guard(store.lock);
  if (store.kept.size() >= 1024) store.kept.clear();
  return store.kept.emplace(full, made).first->second;
}

// int64 [len(values)] on `device`, kept: one fill per value, stacked.
inline at::Tensor int64_vector_constant(const std::vector<int64_t>& values, const c10::Device& device) {
  std::string key = "int64";
  for (const int64_t v : values) key += "," + std::to_string(v);
  return device_constant(key, device, [&] {
    const auto options = at::TensorOptions().dtype(at::kLong).device(device);
    std::vector<at::Tensor> parts;
    for (const int64_t v : values) parts.push_back(at::full(c10::IntArrayRef{}, v, options));
    return at::stack(parts);
  });
}

}  // namespace mxs
