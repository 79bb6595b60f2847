// SPDX-License-Identifier: Apache-2.0
// An axis-aligned box in double precision: the cubic cell of an octree node.
#pragma once

namespace canopy::trees {

// Cells are half-open, [lo, hi) per axis; the root cell is padded so every point lies inside.
struct box {
  double lo[3];
  double hi[3];
};

}  // namespace canopy::trees
