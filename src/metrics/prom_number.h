// A sample value in Prometheus' text format.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace jankbpf {

// Whole numbers (counts, up to 2^53) in digits: 870, not the shortest form
// %g gives, 8.7e+02, which scrapers read but people and line-matching
// alerts do not. Others in the shortest form that reads back the same:
// le="0.15", not 0.14999999999999999.
inline std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0) {
    snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; precision++) {
    snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace jankbpf
