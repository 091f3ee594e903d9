// Numbers with a fixed count of decimals, for progress lines, reports and tables.
#pragma once

#include <cstdio>
#include <string>

namespace cgdp {

// `value` with `digits` digits after the point ("%.*f").
inline std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

}  // namespace cgdp
