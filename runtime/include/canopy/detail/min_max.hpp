// SPDX-License-Identifier: Apache-2.0
// The smaller and the larger of two values, for host and device code. On the device, float and
// double use fmin/fmax: one FMNMX instruction where the select is a compare and a select; the
// octree payload's bounding box made those 9% of a pass's instructions (bench/RESULTS.md,
// fourteenth and fifteenth sessions). Both forms agree for every non-NaN value up to the sign of
// a zero; with a NaN argument fmin/fmax return the other one, the select returns `a`. The host
// keeps the select. Used by the lane groups' min/max (canopy/lane_group.cuh) and the octree
// payloads (canopy/trees/multipole.hpp).
#pragma once

#include <type_traits>

#include "canopy/config.hpp"

namespace canopy::detail {

template <class T>
CANOPY_HD constexpr T smaller(T a, T b) {
#if CANOPY_DEVICE_CODE
  if constexpr (std::is_same_v<T, float>) return fminf(a, b);
  else if constexpr (std::is_same_v<T, double>) return fmin(a, b);
  else return b < a ? b : a;
#else
  return b < a ? b : a;
#endif
}

template <class T>
CANOPY_HD constexpr T larger(T a, T b) {
#if CANOPY_DEVICE_CODE
  if constexpr (std::is_same_v<T, float>) return fmaxf(a, b);
  else if constexpr (std::is_same_v<T, double>) return fmax(a, b);
  else return a < b ? b : a;
#else
  return a < b ? b : a;
#endif
}

}  // namespace canopy::detail
