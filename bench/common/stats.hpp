// SPDX-License-Identifier: Apache-2.0
// Host-side statistics over timing samples (header-only, no CUDA).
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace canopy::bench {

struct summary {
  double median = 0;
  double min = 0;
  double max = 0;
  std::size_t count = 0;
};

/// Median (mean of the two middle samples for an even count), min and max. Throws on no samples.
inline summary summarize(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  summary s;
  s.count = n;
  s.min = samples.front();
  s.max = samples.back();
  s.median = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return s;
}

inline double median(std::vector<double> samples) { return summarize(std::move(samples)).median; }

}  // namespace canopy::bench
