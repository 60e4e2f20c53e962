// The pybind11 functions of mx_sparse._C, registered by the files that implement them
// (extension_module.cpp only wires them into the module).
#pragma once
#include <torch/extension.h>

namespace mxs {

// mx_sparse._C.contract: the argument checks, output extents, key packing and key deltas
// (kernels/contract/contract_bindings.cpp), reached from Python through mx_sparse._core.contract.
void register_contract_functions(pybind11::module_& m);

// mx_sparse._C.map_orchestration: the accelerators' map builders over ATen operators around the
// device primitives (kernels/orchestration/neighbor_map_orchestration.cpp), reached from
// mx_sparse/_accelerator/neighbor_map.py.
void register_map_orchestration_functions(pybind11::module_& m);

// mx_sparse._C.batch_norm_operators: the NPU's fused BatchNorm+ReLU over ATen operators, common
// case (kernels/orchestration/batch_norm_operators.cpp), registered as the ops' NPU kernels by
// mx_sparse/_accelerator/registration.py.
void register_batch_norm_operators_functions(pybind11::module_& m);

// CPU pool statistics and the CPU kernels chosen on this machine (kernels/cpu/cpu_info_bindings.cpp).
void register_cpu_info_functions(pybind11::module_& m);

// The on/off environment switch parser (kernels/cpu/env_switch_bindings.cpp); also checks the
// CPU kernels' switches when the module loads.
void register_env_switch_functions(pybind11::module_& m);

}  // namespace mxs
