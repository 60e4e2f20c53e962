// The NPU's fused BatchNorm+ReLU, common case, over ATen operators: the operators
// mx_sparse/_accelerator/batch_norm_operators.py's docstring lists (the same bits as the Python
// they were ported from), and the contract's argument checks (batch_norm_relu_args.h, float16
// taken). Done in C++ and registered as the ops' kernel for the NPU's dispatch key (and for the
// CPU key under MXS_NPU_ON_CPU=1) so that a call costs the host no Python (issue 32: the Python around these
// operators -- checks, case tests, the twins' lookup, calls -- was ~200 of the ~610 us the NPU
// path's 12 fused layers cost the host per training step; bench.batch_norm_host). One copy for
// any device: the operators dispatch on the tensors' device (torch_npu serves each with one aclnn
// call).
//
// Everything outside the common case (a mixture of dtypes, a momentum outside [0, 1], running
// statistics of a one-row batch, no channels, running statistics in the backward) calls
// batch_norm_operators.py's general route, Python callables handed in once (use_general_route),
// which use scale_shift and relu_gate from here. batch_norm_operators.py's forward, scale_shift_relu
// and backward (the implementation of devices without kernels of their own) are these kernels: one
// copy of the common case.
//
// The forward's float32 mean and invstd and its float64 shift, which the backward reuses instead
// of casting the float64 mean, invstd and the shift again (3 operators a call), are found as in
// Python through the float64 mean the backward gets: a small table keyed by its TensorImpl, held
// weakly, with the identities of invstd and shift and the version counters at the forward.
#include <torch/extension.h>

#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../contract/batch_norm_relu_args.h"
#include "../module/module_parts.h"

namespace mxs {
namespace {

using MaybeTensor = std::optional<at::Tensor>;
using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using BackwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

at::ScalarType compute_dtype(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

at::Tensor held(const at::Tensor& t, at::ScalarType dtype) { return t.scalar_type() == dtype ? t : t.to(dtype); }

bool absent_or(const MaybeTensor& t, at::ScalarType dtype) {
  return !t.has_value() || !t->defined() || t->scalar_type() == dtype;
}

bool present(const MaybeTensor& t) { return t.has_value() && t->defined(); }

// ---- the general route (batch_norm_operators.forward / backward: they take it for these inputs)

struct GeneralRoute {
  pybind11::object forward, backward;
};
// set once by use_general_route and never freed: Python objects must not be destroyed after the
// interpreter at exit
GeneralRoute* general_route = nullptr;

GeneralRoute& general() {
  TORCH_CHECK(general_route != nullptr,
              "mx_sparse: the NPU BatchNorm's general route is not set (mx_sparse._accelerator.registration "
              "sets it with mx_sparse._C.batch_norm_operators.use_general_route)");
  return *general_route;
}

ForwardResult general_forward(const at::Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                              const MaybeTensor& running_mean, const MaybeTensor& running_var, bool batch_stats,
                              double momentum, double eps) {
  pybind11::gil_scoped_acquire gil;
  return general().forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps)
      .cast<ForwardResult>();
}

BackwardResult general_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& mean,
                                const at::Tensor& invstd, const MaybeTensor& weight, const at::Tensor& scale,
                                const at::Tensor& shift, bool batch_stats) {
  pybind11::gil_scoped_acquire gil;
  return general().backward(grad, input, mean, invstd, weight, scale, shift, batch_stats).cast<BackwardResult>();
}

// ---- the forward's twins (batch_norm_operators.py's docstring)

struct Twins {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> mean64;   // the key, weakly
  at::Tensor invstd64, shift;                        // identity checks
  int64_t mean64_version, shift_version;             // invstd64 is a row of mean64's block: one counter
  at::Tensor mean, invstd, shift64;                  // the same values in the other dtype
};

class TwinsTable {
 public:
  void put(const at::Tensor& mean64, const at::Tensor& invstd64, const at::Tensor& shift, const at::Tensor& mean,
           const at::Tensor& invstd, const at::Tensor& shift64) {
    if (untracked(mean64, shift)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (table_.size() >= purge_at_) purge();
    c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> key(mean64.getIntrusivePtr());
    table_.insert_or_assign(mean64.unsafeGetTensorImpl(),
                            Twins{std::move(key), invstd64, shift, mean64._version(), shift._version(), mean,
                                  invstd, shift64});
  }

  // The forward's twins if mean64, invstd64 and shift are the tensors it returned, unchanged.
  std::optional<Twins> find(const at::Tensor& mean64, const at::Tensor& invstd64, const at::Tensor& shift) {
    if (untracked(mean64, shift)) return std::nullopt;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(mean64.unsafeGetTensorImpl());
    if (it == table_.end()) return std::nullopt;
    const Twins& t = it->second;
    // a dead key's address may be a new tensor's: the strong invstd64 and shift cannot be reused
    if (t.mean64.expired() || !t.invstd64.is_same(invstd64) || !t.shift.is_same(shift) ||
        t.mean64_version != mean64._version() || t.shift_version != shift._version())
      return std::nullopt;
    return t;
  }

 private:
  // inference tensors (torch.inference_mode) have no version counter: no twins, the casts
  static bool untracked(const at::Tensor& mean64, const at::Tensor& shift) {
    return mean64.is_inference() || shift.is_inference();
  }

  // entries whose mean is gone, dropped when the table has doubled since the last purge (a
  // training step holds one per fused layer until its backward)
  void purge() {
    for (auto it = table_.begin(); it != table_.end();) it = it->second.mean64.expired() ? table_.erase(it) : ++it;
    purge_at_ = std::max<size_t>(64, 2 * table_.size());
  }

  std::mutex mutex_;
  std::unordered_map<const c10::TensorImpl*, Twins> table_;
  size_t purge_at_ = 64;
};

TwinsTable& forward_twins() {
  static auto* table = new TwinsTable();   // never destroyed: it holds tensors past static destruction
  return *table;
}

// ---- the common case

// batch statistics, every per-channel tensor in the compute dtype, both running statistics or
// neither, a momentum in [0, 1], more than one row where the running variance is blended, at least
// one channel
bool fits_native(const at::Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                 const MaybeTensor& running_mean, const MaybeTensor& running_var, bool batch_stats,
                 double momentum) {
  const at::ScalarType dtype = compute_dtype(input.scalar_type());
  const int64_t n = input.size(0), c = input.size(1);
  const bool has_running = present(running_mean);
  return batch_stats && c > 0 && n > 0 && has_running == present(running_var) && (n > 1 || !has_running) &&
         momentum >= 0.0 && momentum <= 1.0 && absent_or(weight, dtype) && absent_or(bias, dtype) &&
         absent_or(running_mean, dtype) && absent_or(running_var, dtype);
}

// scale = invstd * gamma, shift = beta - mean * scale (per channel; the general route's float64 ones too)
std::tuple<at::Tensor, at::Tensor> scale_shift(const at::Tensor& mean, const at::Tensor& invstd,
                                               const MaybeTensor& weight, const MaybeTensor& bias) {
  const at::Tensor scale = present(weight) ? at::mul(invstd, *weight) : invstd;
  return {scale, present(bias) ? at::addcmul(*bias, mean, scale, -1) : at::mul(mean, scale).neg_()};
}

ForwardResult forward(const at::Tensor& input, const MaybeTensor& weight, const MaybeTensor& bias,
                      const MaybeTensor& running_mean, const MaybeTensor& running_var, bool batch_stats,
                      double momentum, double eps) {
  check_batch_norm_relu_forward_args(input, weight, bias, running_mean, running_var, batch_stats, true);
  if (!fits_native(input, weight, bias, running_mean, running_var, batch_stats, momentum))
    return general_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps);
  const at::Tensor x = held(input, compute_dtype(input.scalar_type()));
  // native_batch_norm also blends the running statistics (the unbiased variance); its normalised
  // output is not used: y is rebuilt from the rounded scale and shift, which the recompute repeats
  const auto statistics = at::native_batch_norm(x, {}, {}, running_mean, running_var, true, momentum, eps);
  const at::Tensor& mean = std::get<1>(statistics);
  const at::Tensor& invstd = std::get<2>(statistics);
  const auto [scale, shift] = scale_shift(mean, invstd, weight, bias);
  const at::Tensor y = at::addcmul(shift, x, scale).relu_();
  // one [3, C] float64 block (one stack, one cast): mean and invstd for the contract, shift for
  // the backward's gate. (Not one stack into a float64 out: torch_npu's stack.out requires an out
  // of the inputs' dtype, which ATen's CPU kernel does not.)
  const auto rows = at::stack({mean, invstd, shift}).to(at::kDouble).unbind();
  forward_twins().put(rows[0], rows[1], shift, mean, invstd, rows[2]);
  return {held(y, input.scalar_type()), rows[0], rows[1], scale, shift};
}

at::Tensor scale_shift_relu(const at::Tensor& input, const at::Tensor& scale, const at::Tensor& shift) {
  check_scale_shift_relu_args(input, scale, shift, true);
  const at::ScalarType dtype = compute_dtype(input.scalar_type());
  const at::Tensor x = held(input, dtype), s = held(scale, dtype), b = held(shift, dtype);
  return held(at::addcmul(b, x, s).relu_(), input.scalar_type());
}

// grad where x * scale + shift > 0 as the CPU kernels decide it (why these operators:
// batch_norm_operators.py's docstring): float32 from one float64 addcmul (the exact product, one
// rounding) narrowed, float64 from a product then a sum, then leaky_relu_backward of slope 0
at::Tensor relu_gate(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                     const std::optional<at::Tensor>& shift64) {
  at::Tensor pre;
  if (x.scalar_type() == at::kDouble)
    pre = at::mul(x, scale).add_(shift);
  else
    pre = at::addcmul(shift64.has_value() ? *shift64 : shift.to(at::kDouble), x, scale).to(dy.scalar_type());
  return at::leaky_relu_backward(dy, pre, 0.0, false);
}

BackwardResult backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& mean,
                        const at::Tensor& invstd, const MaybeTensor& weight, const at::Tensor& scale,
                        const at::Tensor& shift, bool batch_stats) {
  check_batch_norm_relu_backward_args(grad, input, mean, invstd, weight, scale, shift, true);
  const at::ScalarType dtype = compute_dtype(input.scalar_type());
  if (!(batch_stats && input.numel() > 0 && absent_or(weight, dtype) && scale.scalar_type() == dtype &&
        shift.scalar_type() == dtype))
    return general_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats);
  const at::Tensor x = held(input, dtype), dy = held(grad, dtype);
  at::Tensor mu, inv;
  std::optional<at::Tensor> shift64;
  std::optional<Twins> twins = forward_twins().find(mean, invstd, shift);
  if (twins.has_value() && twins->mean.scalar_type() == dtype) {
    mu = twins->mean, inv = twins->invstd, shift64 = twins->shift64;
  } else {
    mu = held(mean, dtype), inv = held(invstd, dtype);
  }
  const at::Tensor g = relu_gate(dy, x, scale, shift, shift64);
  auto [dx, dgamma, dbeta] =
      at::native_batch_norm_backward(g, x, weight, {}, {}, mu, inv, true, 0.0, {true, true, true});
  const at::ScalarType channel_dtype = present(weight) ? weight->scalar_type() : input.scalar_type();
  return {held(dx, input.scalar_type()), held(dgamma, channel_dtype), held(dbeta, channel_dtype)};
}

// ---- registration

// Registering for the CPU key replaces the C++ CPU kernels (MXS_NPU_ON_CPU=1: the point of the
// switch); the dispatcher warns about it, this drops that one warning.
class OverrideWarningFilter : public c10::WarningHandler {
 public:
  explicit OverrideWarningFilter(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos) next_->process(warning);
  }

 private:
  c10::WarningHandler* next_;
};

// the registrations last as long as their Library (the process)
std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* libs = new std::vector<std::unique_ptr<torch::Library>>();
  return *libs;
}

void register_for(const std::string& dispatch_key) {
  OverrideWarningFilter filter(c10::WarningUtils::get_warning_handler());
  c10::WarningUtils::WarningHandlerGuard guard(&filter);
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "mx_sparse", c10::parseDispatchKey(dispatch_key),
                                              __FILE__, __LINE__);
  lib->impl("batch_norm_relu_forward", TORCH_FN(forward));
  lib->impl("scale_shift_relu", TORCH_FN(scale_shift_relu));
  lib->impl("batch_norm_relu_backward", TORCH_FN(backward));
  libraries().push_back(std::move(lib));
}

}  // namespace

void register_batch_norm_operators_functions(pybind11::module_& module) {
  namespace py = pybind11;
  py::module_ m = module.def_submodule(
      "batch_norm_operators", "The NPU's fused BatchNorm+ReLU, common case, over ATen operators "
                              "(kernels/orchestration/batch_norm_operators.cpp); see "
                              "mx_sparse/_accelerator/batch_norm_operators.py");
  m.def("use_general_route", [](py::object forward, py::object backward) {
    if (general_route == nullptr) general_route = new GeneralRoute();
    general_route->forward = std::move(forward);
    general_route->backward = std::move(backward);
  }, py::arg("forward"), py::arg("backward"), "the callables of the cases outside the common one");
  m.def("register", &register_for, py::arg("dispatch_key"),
        "registers forward, scale_shift_relu and backward as the kernels of the three ops for the key");
  // the kernels themselves (checks included), for the benches and tests
  m.def("forward", &forward, py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("running_mean"),
        py::arg("running_var"), py::arg("batch_stats"), py::arg("momentum"), py::arg("eps"));
  m.def("scale_shift_relu", &scale_shift_relu, py::arg("input"), py::arg("scale"), py::arg("shift"));
  // the pieces the general route shares (batch_norm_operators.py)
  m.def("scale_shift", &scale_shift, py::arg("mean"), py::arg("invstd"), py::arg("weight"), py::arg("bias"));
  m.def("relu_gate", &relu_gate, py::arg("grad"), py::arg("x"), py::arg("scale"), py::arg("shift"),
        py::arg("shift64") = std::nullopt);
  m.def("backward", &backward, py::arg("grad"), py::arg("input"), py::arg("mean"), py::arg("invstd"),
        py::arg("weight"), py::arg("scale"), py::arg("shift"), py::arg("batch_stats"));
}

}  // namespace mxs
