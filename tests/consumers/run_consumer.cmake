# One consumer test (tests/consumers/CMakeLists.txt registers them):
#   cmake -DKIND=... -DWORK=<a fresh build folder> -DPREFIX=<install prefix> ... -P run_consumer.cmake
# KIND install: `cmake --install BUILD_DIR --prefix PREFIX` into an emptied PREFIX.
# KIND find_package, pkg_config: builds the project of that name against PREFIX;
# subproject, fetchcontent: builds subproject/ with attnbwd's sources (SOURCE_DIR).
# Each builds my_app (the shared library) and my_app_static (the static one),
# checks with readelf that each links the library it names, and runs both: each
# must compile one kernel for sm_90, which needs no GPU.
cmake_minimum_required(VERSION 3.24)
set(here ${CMAKE_CURRENT_LIST_DIR})

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd}\nexited with ${rc}:\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# app: the program; shared: whether it must load libattnbwd.so.
function(check_app app shared)
  run_step(${READELF} -d ${app})
  if(shared AND NOT step_output MATCHES "NEEDED[^\n]*libattnbwd\\.so")
    message(FATAL_ERROR "${app} does not load libattnbwd.so:\n${step_output}")
  elseif(NOT shared AND step_output MATCHES "libattnbwd\\.so")
    message(FATAL_ERROR "${app} should hold the static library but loads libattnbwd.so:\n${step_output}")
  endif()
  run_step(${app})
  if(NOT step_output MATCHES "softmax_dropout_bwd[^\n]* for sm_90: [1-9][0-9]* bytes of cubin")
    message(FATAL_ERROR "${app} printed:\n${step_output}")
  endif()
  message(STATUS "${app}: ${step_output}")
endfunction()

if(KIND STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
  return()
endif()

file(REMOVE_RECURSE ${WORK})
set(configure ${CMAKE_COMMAND} -G ${GENERATOR} -DCMAKE_C_COMPILER=${C_COMPILER} -B ${WORK})
if(MAKE_PROGRAM)
  list(APPEND configure -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(KIND STREQUAL "find_package")
  run_step(${configure} -S ${here}/find_package -DCMAKE_PREFIX_PATH=${PREFIX})
  run_step(${CMAKE_COMMAND} --build ${WORK})
elseif(KIND STREQUAL "subproject" OR KIND STREQUAL "fetchcontent")
  if(KIND STREQUAL "fetchcontent")
    list(APPEND configure -DUSE_FETCHCONTENT=ON)
  endif()
  run_step(${configure} -S ${here}/subproject -DATTNBWD_SOURCE_DIR=${SOURCE_DIR})
  run_step(${CMAKE_COMMAND} --build ${WORK} -j 2)
elseif(KIND STREQUAL "pkg_config")
  file(MAKE_DIRECTORY ${WORK})
  run_step(${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/${LIBDIR}/pkgconfig
    ${GNU_MAKE} -C ${WORK} -f ${here}/pkg_config/Makefile SRC=${here}/find_package/main.c CC=${C_COMPILER}
    PKG_CONFIG=${PKG_CONFIG})
else()
  message(FATAL_ERROR "unknown KIND '${KIND}'")
endif()
check_app(${WORK}/my_app ON)
check_app(${WORK}/my_app_static OFF)
