// SPDX-License-Identifier: Apache-2.0
// Canopy's version, and the revision of the sources the library was built from.
// The numbers below are the only place the version is written: CMakeLists.txt reads them for
// project(VERSION), the package's version file and canopy.pc. CHANGELOG.md says what changed.
#pragma once

#include <string_view>

#define CANOPY_VERSION_MAJOR 0
#define CANOPY_VERSION_MINOR 12
#define CANOPY_VERSION_PATCH 0

#define CANOPY_VERSION_DETAIL_STR(x) #x
#define CANOPY_VERSION_DETAIL_XSTR(x) CANOPY_VERSION_DETAIL_STR(x)
/// "MAJOR.MINOR.PATCH", a string literal.
#define CANOPY_VERSION_STRING                                                                    \
  CANOPY_VERSION_DETAIL_XSTR(CANOPY_VERSION_MAJOR)                                               \
  "." CANOPY_VERSION_DETAIL_XSTR(CANOPY_VERSION_MINOR) "." CANOPY_VERSION_DETAIL_XSTR(CANOPY_VERSION_PATCH)

namespace canopy {

inline constexpr int version_major = CANOPY_VERSION_MAJOR;  ///< breaking changes (from 1.0)
inline constexpr int version_minor = CANOPY_VERSION_MINOR;  ///< 0.x: a new minor version may break the API
inline constexpr int version_patch = CANOPY_VERSION_PATCH;  ///< fixes only

/// The version as "MAJOR.MINOR.PATCH" (the headers' version: what the caller compiled against).
inline constexpr std::string_view version_string = CANOPY_VERSION_STRING;

/// The revision canopy::runtime was built from: `git describe --always --dirty` of Canopy's source
/// tree at build time (a commit hash, with "-dirty" when there were uncommitted changes), or
/// "unknown" when the sources were not a git checkout or git was not there. Refreshed on every
/// build of the library (one small generated file is recompiled when it changes).
const char* git_revision() noexcept;

}  // namespace canopy
