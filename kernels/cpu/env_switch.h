// The one parser of mx_sparse's on/off environment switches (MXS_CPU_POOL,
// MXS_DISABLE_AMX, MXS_CPU_PORTABLE here; MXS_CUDA_ON_CPU and the other switches the
// Python side reads, through mx_sparse._C.env_switch). Unset or empty: the default.
// 1, true, on, yes switch on; 0, false, off, no switch off (any letter case,
// surrounding blanks ignored). Anything else is an error naming the variable, the
// value and the allowed values: "MXS_CPU_POOL=off" used to leave the pool on, and
// "MXS_DISABLE_AMX=false" disabled AMX, because each reader compared with "0" itself.
#pragma once
#include <c10/util/Exception.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace mxs {

constexpr const char* kSwitchValues = "1, true, on, yes or 0, false, off, no (or unset)";

enum class SwitchValue { kUnset, kOn, kOff, kInvalid };

// What `raw` (nullptr: unset) says, without throwing: for readers that run while the
// extension is being loaded (static initialisers), where an exception would abort the
// process; the module's init then reports the bad value (kernels/module/extension_module.cpp).
inline SwitchValue switch_value(const char* raw) {
  if (raw == nullptr) return SwitchValue::kUnset;
  std::string v(raw);
  const auto first = v.find_first_not_of(" \t"), last = v.find_last_not_of(" \t");
  v = first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
  for (char& ch : v) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (v.empty()) return SwitchValue::kUnset;
  if (v == "1" || v == "true" || v == "on" || v == "yes") return SwitchValue::kOn;
  if (v == "0" || v == "false" || v == "off" || v == "no") return SwitchValue::kOff;
  return SwitchValue::kInvalid;
}

// The switch's value in `raw` (nullptr: unset); `name` is only for the message.
inline bool parse_switch(const char* name, const char* raw, bool fallback) {
  const SwitchValue value = switch_value(raw);
  if (value != SwitchValue::kInvalid) return value == SwitchValue::kUnset ? fallback : value == SwitchValue::kOn;
  // the value may hold anything (a newline, control bytes): shown escaped, as a C string would be
  std::string shown;
  for (unsigned char ch : std::string(raw)) {
    static const char* hex = "0123456789abcdef";
    if (ch == '\\') shown += "\\\\";
    else if (ch == '\'') shown += "\\'";
    else if (ch >= 0x20 && ch < 0x7f) shown += char(ch);
    else shown += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
  }
  TORCH_CHECK_VALUE(false, name, ": expected ", kSwitchValues, ", got '", shown, "'");
  return fallback;
}

inline bool env_switch(const char* name, bool fallback) { return parse_switch(name, std::getenv(name), fallback); }

// env_switch for readers that may run during static initialisation: an invalid value reads as
// `if_invalid` here (the import fails on it anyway, with the message).
inline bool env_switch_nothrow(const char* name, bool fallback, bool if_invalid) {
  const SwitchValue value = switch_value(std::getenv(name));
  if (value == SwitchValue::kInvalid) return if_invalid;
  return value == SwitchValue::kUnset ? fallback : value == SwitchValue::kOn;
}

}  // namespace mxs
