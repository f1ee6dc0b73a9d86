# WEFT_CUDA=AUTO|ON|OFF: the CUDA parts (kernels, device path of libnccl.so.2,
# cuda_ipc transport, GPU tests). AUTO builds them when a CUDA compiler is
# found. Sets WEFT_CUDA_ENABLED.
set(WEFT_CUDA "AUTO" CACHE STRING "CUDA parts: AUTO (when nvcc is found), ON or OFF")
set(WEFT_CUDA_ENABLED OFF)
if(NOT WEFT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/src/kernels/reduce.cu)
    set(WEFT_CUDA_ENABLED ON)
    # One architecture keeps CI's compile time down: sm_90 (H100/H200).
    # Override with -DCMAKE_CUDA_ARCHITECTURES=... for other GPUs.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    # One CUDA runtime per binary: the shared libcudart that CUDA::cudart
    # names (the default would add the static one to every consumer too).
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
  elseif(WEFT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "WEFT_CUDA=ON but no CUDA compiler/toolkit was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()
if(NOT WEFT_CUDA_ENABLED)
  find_package(CUDAToolkit QUIET)  # only for the toolkit's nccl.h (ABI checks)
endif()
message(STATUS "weft: CUDA parts ${WEFT_CUDA_ENABLED}")
