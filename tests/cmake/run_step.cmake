# SPDX-License-Identifier: Apache-2.0
# The one helper of the script-mode tests (cmake -P: the install, consumer, sub-project and pip
# tests): run(WHAT COMMAND [ARGS...]) runs COMMAND; a non-zero exit fails the script with WHAT, the
# exit status and both streams; otherwise the caller's `output` holds stdout then stderr.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()
