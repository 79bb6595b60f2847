# SPDX-License-Identifier: Apache-2.0
# Compile C, C++ and CUDA through ccache (Debian's ccache 4.7 caches nvcc too). The cache is ccache's
# own folder on the machine (~/.cache/ccache unless CCACHE_DIR says otherwise), so a fresh clone, a
# second preset or a CI run after a developer's build reuses every object whose inputs are the same.
#   base_dir = the source tree: paths under it are hashed relative to the build folder, so two
#              checkouts at different places share their entries;
#   hash_dir off: the working directory is not part of the key (same reason; only the debug info of
#              the sanitizer builds names the other checkout's folder);
#   sloppiness: pch_defines,time_macros let the tool's precompiled header be cached; the include
#              files' mtime/ctime are ignored so a fresh clone's just-written headers are no reason
#              to skip the cache (their contents are still hashed).
# A user's own CMAKE_<LANG>_COMPILER_LAUNCHER is kept; -DCANOPY_CCACHE=OFF turns this off.
find_program(CANOPY_CCACHE_PROGRAM ccache)
if(NOT CANOPY_CCACHE_PROGRAM)
  message(STATUS "canopy: ccache not found; compiling without a cache (tools/setup installs it)")
  return()
endif()
set(canopy_ccache_launcher
    ${CMAKE_COMMAND} -E env
    CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
    CCACHE_NOHASHDIR=1
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
    ${CANOPY_CCACHE_PROGRAM})
foreach(lang C CXX CUDA)
  if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${lang}_COMPILER_LAUNCHER})
    set(CMAKE_${lang}_COMPILER_LAUNCHER ${canopy_ccache_launcher})
  endif()
endforeach()
message(STATUS "canopy: compiling through ${CANOPY_CCACHE_PROGRAM}")
