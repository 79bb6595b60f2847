# SPDX-License-Identifier: Apache-2.0
# Warnings, sanitizers and link options shared by every Canopy target.
add_library(canopy_warnings INTERFACE)
add_library(canopy::warnings ALIAS canopy_warnings)
target_compile_options(canopy_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr -Xcudafe=--display_error_number>)

# What the users of a Canopy library must compile with, in C++ and in CUDA: C++20 (cuda_std_20 for
# .cu files; cmake/CanopyCudaDialect.cmake teaches CMake 3.25 the flag) and nvcc's
# --expt-relaxed-constexpr (the portable headers call constexpr std:: and cuda::std functions from
# device code). On the installed targets too, so that a consumer's .cu files need no flags by hand.
function(canopy_usage_requirements target)
  target_compile_features(${target} INTERFACE cxx_std_20 cuda_std_20)
  target_compile_options(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
endfunction()

# The sanitizer and fuzzer flags below are directory-scoped (Canopy's own tree, never a parent
# project's) and only ever set on request (the tsan, asan and fuzz presets).
if(CANOPY_SANITIZE STREQUAL "thread")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread> $<$<COMPILE_LANGUAGE:CXX>:-g>)
  add_link_options(-fsanitize=thread)
elseif(CANOPY_SANITIZE STREQUAL "address")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer> $<$<COMPILE_LANGUAGE:CXX>:-g>)
  add_link_options(-fsanitize=address,undefined)
elseif(NOT CANOPY_SANITIZE STREQUAL "")
  message(FATAL_ERROR "CANOPY_SANITIZE must be '', 'thread' or 'address', not '${CANOPY_SANITIZE}'")
endif()

if(CANOPY_FUZZ)
  # libFuzzer builds (fuzz/, preset `fuzz`, clang): every library instrumented for coverage, ASan
  # and UBSan (halting on the first report); the fuzz targets add -fsanitize=fuzzer for main().
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer> $<$<COMPILE_LANGUAGE:CXX>:-g>)
  add_link_options(-fsanitize=address,undefined)
endif()

if(CANOPY_PORTABLE_BINARIES)
  # The GPU machine has the driver but none of our Debian libraries: static cudart (CMake's
  # default), static gtest (Debian ships only .a), header-only spdlog/fmt, and static C++ runtime.
  add_link_options(-static-libstdc++ -static-libgcc)
endif()

# canopy_add_test(NAME <name> SOURCES <files...> LIBS <targets...> [GPU])
# GPU tests carry the CTest label `gpu` and skip themselves (GTEST_SKIP) without a device.
function(canopy_add_test)
  cmake_parse_arguments(T "GPU" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main canopy::warnings)
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  if(T_GPU)
    gtest_discover_tests(${T_NAME} PROPERTIES LABELS gpu DISCOVERY_MODE PRE_TEST)
  else()
    gtest_discover_tests(${T_NAME} PROPERTIES LABELS cpu DISCOVERY_MODE PRE_TEST)
  endif()
endfunction()
