# SPDX-License-Identifier: Apache-2.0
# cmake -DBINARY=<path> -P check_portable.cmake
# Fails when BINARY needs a shared library that a bare machine with only glibc and the NVIDIA
# driver would not have (libstdc++, libfmt, Boost, ...).
find_program(OBJDUMP objdump REQUIRED)
execute_process(COMMAND ${OBJDUMP} -p ${BINARY} OUTPUT_VARIABLE headers RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -p ${BINARY} failed")
endif()
string(REGEX MATCHALL "NEEDED +[^\n]+" needed "${headers}")
set(bad "")
set(libs "")
foreach(entry IN LISTS needed)
  string(REGEX REPLACE "NEEDED +" "" lib "${entry}")
  list(APPEND libs ${lib})
  if(NOT lib MATCHES "^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda)\\.so")
    list(APPEND bad ${lib})
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "${BINARY} needs shared libraries the GPU machine does not have: ${bad}")
endif()
message(STATUS "${BINARY}: needs only system libraries (${libs})")
