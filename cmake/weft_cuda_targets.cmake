# The CUDA targets (WEFT_CUDA_ENABLED): GPU kernels, the cuda_ipc transport
# and their benchmark. They stay out of weft_core/libweft.so, so a CUDA build
# changes nothing for host-only users; libnccl.so.2 and the GPU tests link
# them.
if(NOT WEFT_CUDA_ENABLED)
  return()
endif()

# The top-level warning, -Werror and sanitizer flags are host-compiler flags
# that nvcc does not take: CUDA targets get their own.
function(weft_cuda_flags target)
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter;-fmad=false>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${WEFT_WERROR}>>:-Werror=all-warnings>
    $<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${WEFT_WERROR}>>:-Werror>)
endfunction()

add_library(weft_cuda_kernels STATIC ${CMAKE_SOURCE_DIR}/src/kernels/reduce.cu)
weft_cuda_flags(weft_cuda_kernels)
target_include_directories(weft_cuda_kernels PUBLIC ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(weft_cuda_kernels PUBLIC CUDA::cudart)
target_compile_definitions(weft_cuda_kernels INTERFACE WEFT_HAVE_CUDA=1)
set_target_properties(weft_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

if(EXISTS ${CMAKE_SOURCE_DIR}/src/transport/cuda_ipc/CMakeLists.txt)
  add_subdirectory(${CMAKE_SOURCE_DIR}/src/transport/cuda_ipc ${CMAKE_BINARY_DIR}/src/transport/cuda_ipc)
endif()
