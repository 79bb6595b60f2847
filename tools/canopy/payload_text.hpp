// SPDX-License-Identifier: Apache-2.0
// A multipole payload as the tool prints it: JSON (--json) and the indented block of
// `canopy accumulate`, on one process and across ranks (cmd_accumulate.cpp, cmd_distributed.cpp).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "canopy/trees/multipole.hpp"

namespace canopy::tool {

template <class T>
nlohmann::json payload_json(const canopy::trees::multipole<T>& p) {
  return {{"count", p.count},
          {"mass", p.mass},
          {"com", {p.com[0], p.com[1], p.com[2]}},
          {"m2", {{"xx", p.m2[0]}, {"xy", p.m2[1]}, {"xz", p.m2[2]}, {"yy", p.m2[3]}, {"yz", p.m2[4]}, {"zz", p.m2[5]}}},
          {"bbox", {{"lo", {p.lo[0], p.lo[1], p.lo[2]}}, {"hi", {p.hi[0], p.hi[1], p.hi[2]}}}}};
}

template <class T>
void print_payload(const canopy::trees::multipole<T>& p) {
  fmt::print("  count     {}\n", p.count);
  fmt::print("  mass      {}\n", p.mass);
  fmt::print("  com       ({}, {}, {})\n", p.com[0], p.com[1], p.com[2]);
  fmt::print("  m2        xx {}  xy {}  xz {}\n", p.m2[0], p.m2[1], p.m2[2]);
  fmt::print("            yy {}  yz {}  zz {}\n", p.m2[3], p.m2[4], p.m2[5]);
  fmt::print("  bbox      ({}, {}, {}) .. ({}, {}, {})\n", p.lo[0], p.lo[1], p.lo[2], p.hi[0], p.hi[1], p.hi[2]);
}

}  // namespace canopy::tool
