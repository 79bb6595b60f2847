// SPDX-License-Identifier: Apache-2.0
// The atomics toolkit: the seeds' techniques for cutting atomic traffic, as reusable functions
// that run warp- and block-aggregated on the GPU and as plain atomics in host code.
//
//   warp_aggregated.hpp   warp_aggregated_increment, warp_reserve, warp_aggregated_add
//   block_aggregated.hpp  block_aggregate<T> (TempStorage, fetch_add, increment_if)
//   hierarchical_max.hpp  hierarchical_max<T> (TempStorage, update)
//   reduce_by_key.hpp     warp_reduce_by_key_add
//   counting_ref.hpp      counting_ref (instrumentation: tallies the atomics issued through a ref)
#pragma once

#include "canopy/atomics/block_aggregated.hpp"
#include "canopy/atomics/counting_ref.hpp"
#include "canopy/atomics/hierarchical_max.hpp"
#include "canopy/atomics/reduce_by_key.hpp"
#include "canopy/atomics/warp_aggregated.hpp"
