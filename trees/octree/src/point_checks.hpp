// SPDX-License-Identifier: Apache-2.0
// The checks every point reader applies (finite coordinates, finite non-negative masses) and
// opening a file for reading with a typed error. Internal to canopy::trees; shared by point_io.cpp
// and the readers of other formats so that all of them reject the same points with the same words.
#pragma once

#include <canopy/trees/point.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

namespace canopy::trees::detail {

// The reason a point is rejected, or empty when it is valid.
std::string point_problem(const point& p);

// Throws input_error(source, "point I: <problem>") for the first invalid point; `first_index` is
// the index of points[0] in the file (readers that check chunk by chunk).
void validate_points(const std::string& source, std::span<const point> points, std::size_t first_index = 0);

// A float64 value that a reader narrows to float32: the reason it cannot be (finite, but beyond
// float32's largest, +-3.4e38), or empty. `field` is 0..3 for x, y, z, m. Values below float32's
// smallest round to it or to 0, as in every reader (the CSV reader included).
std::string narrowing_problem(double value, int field);

// Opens a regular file, or throws input_error naming it ("no such file", "not a regular file").
std::ifstream open_for_reading(const std::filesystem::path& path);

}  // namespace canopy::trees::detail
