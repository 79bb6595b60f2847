// SPDX-License-Identifier: Apache-2.0
// The smaller and the larger of two values, for host and device code: canopy::smaller(a, b) and
// canopy::larger(a, b). On the device, float and double use fmin/fmax: one FMNMX instruction
// where a compare and a select are two, which matters in the bounding box every octree payload
// merge computes (see bench/RESULTS.md). Both forms agree for every non-NaN value up to the sign
// of a zero; with a NaN argument fmin/fmax return the other one, the select returns `a`. The host
// keeps the select. Used by the lane groups' min/max (canopy/lane_group.cuh) and the octree
// payloads (canopy/trees/multipole.hpp).
#pragma once

#include <type_traits>

#include "canopy/config.hpp"

namespace canopy {

namespace detail {
enum class extreme { smaller, larger };

/// The `E` of a and b (see the header comment).
template <extreme E, class T>
CANOPY_HD constexpr T pick(T a, T b) {
  constexpr bool low = E == extreme::smaller;
#if CANOPY_DEVICE_CODE
  if constexpr (std::is_same_v<T, float>) return low ? fminf(a, b) : fmaxf(a, b);
  else if constexpr (std::is_same_v<T, double>) return low ? fmin(a, b) : fmax(a, b);
  else
#endif
    return (low ? b < a : a < b) ? b : a;
}
}  // namespace detail

/// min(a, b); `a` when they compare equal.
template <class T>
CANOPY_HD constexpr T smaller(T a, T b) {
  return detail::pick<detail::extreme::smaller>(a, b);
}

/// max(a, b); `a` when they compare equal.
template <class T>
CANOPY_HD constexpr T larger(T a, T b) {
  return detail::pick<detail::extreme::larger>(a, b);
}

}  // namespace canopy
