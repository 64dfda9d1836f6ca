# attnbwd::nvrtc: NVRTC's shared library and nothing else, for the build and
# for attnbwdConfig.cmake (after find_package(CUDAToolkit)); left undefined
# when it cannot be found, for the caller to report. CUDA::nvrtc also links
# the driver, which attnbwd opens with dlopen at the first launch instead, so
# that programs using it start on machines without a GPU.
if(NOT TARGET attnbwd::nvrtc)
  find_library(ATTNBWD_NVRTC_LIBRARY NAMES nvrtc HINTS ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
  if(ATTNBWD_NVRTC_LIBRARY)
    add_library(attnbwd::nvrtc SHARED IMPORTED)
    set_target_properties(attnbwd::nvrtc PROPERTIES IMPORTED_LOCATION ${ATTNBWD_NVRTC_LIBRARY})
  endif()
endif()
