// One field of a JSON record read back by `jankbpf report`, of the type
// wanted, else the fallback. The records are the input's: a number outside
// the field's range (1e24 for an int64, 1e76 for a pid) is its choice, and
// converting it would be undefined, so it reads as absent; so does a
// duration that is negative, not finite or over 1e12.
#pragma once

#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace jankbpf::report {

template <typename T>
T json_field(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->template get<bool>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    using L = std::numeric_limits<T>;
    long double v;
    if (it->is_number_unsigned()) v = static_cast<long double>(it->template get<uint64_t>());
    else if (it->is_number_integer()) v = static_cast<long double>(it->template get<int64_t>());
    else if (it->is_number_float()) v = static_cast<long double>(it->template get<double>());
    else return fallback;
    if (!(v >= static_cast<long double>(L::min()) && v <= static_cast<long double>(L::max()))) return fallback;  // NaN too
    return static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    // Every floating field of a record is a duration (ms, s), which the
    // pictures turn into ns counts: a negative, infinite or NaN one, or one
    // over 1e12 (31 years in ms), would convert out of range there.
    if (!it->is_number()) return fallback;
    const double v = it->template get<double>();
    return v >= 0 && v <= 1e12 ? static_cast<T>(v) : fallback;
  } else {
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      return fallback;
    }
  }
}

}  // namespace jankbpf::report
