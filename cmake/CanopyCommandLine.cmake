# SPDX-License-Identifier: Apache-2.0
# canopy_command_line(<target> [JSON]): what a Canopy program's host units need to parse options
# and log (CLI11, spdlog, fmt; nlohmann_json with JSON), compiled as cheaply as the platform allows.
#  - spdlog and fmt: Debian's compiled libraries (libspdlog.so, libfmt.so) in ordinary builds, so a
#    unit parses their declarations only; the header-only targets where the binaries are carried to
#    a machine that lacks those libraries (CANOPY_PORTABLE_BINARIES: the GPU machine).
#  - one precompiled header of the four libraries for the target's C++ units: header-only CLI11
#    (Debian's 2.1 has no precompiled mode) and nlohmann_json were most of each unit's compile time.
#    CANOPY_PRECOMPILE_HEADERS=OFF compiles without it (e.g. to check each unit's own includes).
option(CANOPY_PRECOMPILE_HEADERS "Precompile the command-line libraries' headers for the tool and examples" ON)
function(canopy_command_line target)
  cmake_parse_arguments(C "JSON" "" "" ${ARGN})
  if(CANOPY_PORTABLE_BINARIES)
    target_link_libraries(${target} PRIVATE spdlog::spdlog_header_only fmt::fmt-header-only)
    # Debian's spdlog::spdlog_header_only still lists the shared libfmt. With FMT_HEADER_ONLY nothing
    # references it, so --as-needed drops it: the binary runs where libfmt is not installed
    # (tests/cpu/tools checks the portable build's dependencies).
    target_link_options(${target} PRIVATE LINKER:--as-needed)
  else()
    target_link_libraries(${target} PRIVATE spdlog::spdlog fmt::fmt)
  endif()
  target_link_libraries(${target} PRIVATE CLI11::CLI11)
  set(headers <CLI/CLI.hpp> <fmt/format.h> <spdlog/spdlog.h>)
  if(C_JSON)
    target_link_libraries(${target} PRIVATE nlohmann_json::nlohmann_json)
    list(APPEND headers <nlohmann/json.hpp>)
  endif()
  if(CANOPY_PRECOMPILE_HEADERS)
    list(TRANSFORM headers PREPEND "$<$<COMPILE_LANGUAGE:CXX>:")
    list(TRANSFORM headers APPEND ">")
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()
