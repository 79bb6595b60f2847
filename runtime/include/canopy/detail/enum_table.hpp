// SPDX-License-Identifier: Apache-2.0
// Tables of named enumerators (the modes, the push policies): one row per enumerator, in
// enumerator order, each with a `name`. The helpers read a table's key column.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>

namespace canopy::detail {

/// The enumerators of `rows`, in the table's order.
template <auto Key, class Row, std::size_t N>
constexpr auto enum_column(const Row (&rows)[N]) {
  std::array<std::remove_cvref_t<decltype(rows[0].*Key)>, N> column{};
  for (std::size_t i = 0; i < N; ++i) column[i] = rows[i].*Key;
  return column;
}

/// Whether row i holds enumerator i, so that a table is indexed by the enumerator's value.
template <auto Key, class Row, std::size_t N>
constexpr bool enum_indexed(const Row (&rows)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<std::size_t>(rows[i].*Key) != i) return false;
  return true;
}

/// The enumerator whose row is named `name`, if any.
template <auto Key, class Row, std::size_t N>
constexpr auto enum_named(const Row (&rows)[N], std::string_view name) {
  std::optional<std::remove_cvref_t<decltype(rows[0].*Key)>> found;
  for (const Row& r : rows)
    if (r.name == name) found = r.*Key;
  return found;
}

}  // namespace canopy::detail
