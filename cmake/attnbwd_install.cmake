# Install rules: the header, both libraries, the tool, the public suites, and
# the package files for find_package(attnbwd) and pkg-config. Both package
# files find the rest relative to themselves, so any --prefix works.
include(CMakePackageConfigHelpers)
set(ATTNBWD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnbwd)

# Components, for a package that wants a part (a Python wheel: runtime):
# runtime (libattnbwd.so.0), development (header, archive, the .so link,
# package files), tool (the attnbwd tool and the suites).
install(TARGETS attnbwd attnbwd_static EXPORT attnbwdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(FILES ${PROJECT_SOURCE_DIR}/include/attnbwd.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT development)
if(ATTNBWD_TOOL)
  set_target_properties(attnbwd_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS attnbwd_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tool)
endif()
file(GLOB ATTNBWD_SUITE_FILES ${PROJECT_SOURCE_DIR}/suites/*.jsonl ${PROJECT_SOURCE_DIR}/suites/*.lua)
install(FILES ${ATTNBWD_SUITE_FILES} DESTINATION ${CMAKE_INSTALL_DATADIR}/attnbwd/suites COMPONENT tool)

install(EXPORT attnbwdTargets NAMESPACE attnbwd:: DESTINATION ${ATTNBWD_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/attnbwdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/attnbwdConfig.cmake INSTALL_DESTINATION ${ATTNBWD_CMAKE_DIR})
# 0.x: a new minor version may change the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnbwdConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnbwdConfig.cmake ${PROJECT_BINARY_DIR}/attnbwdConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/attnbwd_nvrtc.cmake DESTINATION ${ATTNBWD_CMAKE_DIR} COMPONENT development)

# attnbwd.pc: prefix from ${pcfiledir} where the install directories are
# relative to it (the usual case), else the absolute paths.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ATTNBWD_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
else()
  file(RELATIVE_PATH up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
  string(REGEX REPLACE "/$" "" up "${up}")
  set(ATTNBWD_PC_PREFIX "\${pcfiledir}/${up}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(ATTNBWD_PC_${dir} ${CMAKE_INSTALL_${dir}})
  else()
    set(ATTNBWD_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
get_filename_component(ATTNBWD_NVRTC_DIR ${ATTNBWD_NVRTC_LIBRARY} DIRECTORY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/attnbwd.pc.in ${PROJECT_BINARY_DIR}/attnbwd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attnbwd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
