// mx_sparse._C.env_switch / parse_switch: the one parser of mx_sparse's on/off environment switches
// (kernels/cpu/env_switch.h), which the CPU kernels call directly and Python through these
// functions (mx_sparse/runtime/config.py env_switch, the accelerator registration's switches).
#include <torch/extension.h>

#include <cstdlib>
#include <optional>
#include <string>
#include "../module/module_parts.h"
#include "env_switch.h"

namespace mxs {
namespace {

namespace py = pybind11;

// parse_switch with its c10::ValueError raised as Python's ValueError (also while the module
// initialises, before torch's translators would see it); raw == nullptr: unset.
bool checked_switch(const char* name, const char* raw, bool fallback) {
  try {
    return parse_switch(name, raw, fallback);
  } catch (const c10::ValueError& e) {
    throw py::value_error(e.what_without_backtrace());
  }
}

}  // namespace

void register_env_switch_functions(py::module_& m) {
  // The kernels read the switches at load (without throwing) or on first use; a value
  // env_switch.h does not accept fails the import in mx_sparse/runtime/environment.py, which lists
  // every invalid value at once (ValueError naming each variable), not some later kernel call.
  m.def("env_switch", [](const std::string& name, bool fallback) {
    return checked_switch(name.c_str(), std::getenv(name.c_str()), fallback);
  }, "The on/off environment switch `name` (1/true/on/yes, 0/false/off/no; unset or empty: fallback); "
     "ValueError naming it for any other value", py::arg("name"), py::arg("fallback") = false);
  m.def("parse_switch", [](const std::string& name, std::optional<std::string> value, bool fallback) {
    return checked_switch(name.c_str(), value ? value->c_str() : nullptr, fallback);
  }, "env_switch's rules applied to `value` (None: unset)", py::arg("name"), py::arg("value"),
        py::arg("fallback") = false);
}

}  // namespace mxs
