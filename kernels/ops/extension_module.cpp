// Python module entry of the compiled extension. Importing mx_sparse._C runs the
// static TORCH_LIBRARY registrations of every linked backend.
#include <torch/extension.h>

namespace {
std::vector<std::string> compiled_backends() {
  std::vector<std::string> b{"cpu"};
#ifdef MXS_WITH_CUDA
  b.push_back("cuda");
#endif
#ifdef MXS_WITH_NPU
  b.push_back("npu");
#endif
  return b;
}
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mx_sparse compiled operators (registered as torch.ops.mx_sparse.*)";
  m.def("compiled_backends", &compiled_backends, "Backends compiled into this build");
}
