# SPDX-License-Identifier: Apache-2.0
# cmake -DPYTHON=<python with pip, scikit-build-core, nanobind, pytest> -DSOURCE=<canopy sources>
#       -DBINARY=<dir> -P pip_install.cmake
# The README's one-command install, as a user runs it from a clone: `pip install .` (here CPU-only,
# CANOPY_GPU=OFF, without build isolation so that no download is needed, into a target folder
# instead of site-packages), then the module's pytest suite against what pip installed.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/run_step.cmake)  # run()

file(REMOVE_RECURSE ${BINARY})
set(ENV{CANOPY_GPU} OFF)
set(ENV{CMAKE_BUILD_PARALLEL_LEVEL} 2)
run("pip install ${SOURCE}" ${PYTHON} -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps
    --target ${BINARY}/site ${SOURCE})
set(ENV{PYTHONPATH} ${BINARY}/site)
set(ENV{PYTHONDONTWRITEBYTECODE} 1)
set(ENV{MPLBACKEND} Agg)
set(ENV{CANOPY_SOURCE_DIR} ${SOURCE})
# (A file, not -c: CMake would split a one-line script at its semicolons.)
file(WRITE ${BINARY}/where.py [=[
import sys
import canopy
assert canopy.__file__.startswith(sys.argv[1]), "imported " + canopy.__file__ + ", not the installed module"
assert not canopy.has_gpu_backend(), "CANOPY_GPU=OFF built a module with the gpu backend"
print(canopy.__version__, canopy.__file__)
]=])
run("import the installed module" ${PYTHON} ${BINARY}/where.py ${BINARY}/site)
message(STATUS "installed: ${output}")
run("pytest against the installed module" ${PYTHON} -m pytest -q -p no:cacheprovider ${SOURCE}/tests/python)
string(REGEX MATCH "[0-9]+ passed[^\n]*" summary "${output}")
message(STATUS "pytest: ${summary}")
