// Python module entry of the compiled extension. Importing mx_sparse._C runs the
// static TORCH_LIBRARY registrations of every linked backend.
#include <torch/extension.h>

#include "module_parts.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mx_sparse compiled operators (registered as torch.ops.mx_sparse.*)";
  mxs::register_env_switch_functions(m);  // first: a bad switch value fails the import
  mxs::register_cpu_info_functions(m);
  mxs::register_contract_functions(m);
  mxs::register_map_orchestration_functions(m);
  mxs::register_batch_norm_operators_functions(m);
}
