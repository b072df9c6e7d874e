# The CUDA backend (vdnn_cuda): found toolkit + cuDNN + cuBLAS, Hopper code (sm_90) plus PTX; otherwise VDNN_HAVE_CUDA stays OFF.
# Included from the top-level CMakeLists.txt (not add_subdirectory), so plain set() reaches its scope.

set(VDNN_CUDA_ARCHITECTURES "90-real;90-virtual" CACHE STRING
    "CUDA architectures of the CUDA backend (machine code for Hopper plus PTX the driver can JIT for newer GPUs)")

# nvcc is often not on PATH; the toolkit's usual home is a fine hint for both the package and the language.
set(_vdnn_cuda_hints)
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _vdnn_cuda_hints "$ENV{CUDA_HOME}")
endif()
list(APPEND _vdnn_cuda_hints /usr/local/cuda)
if(NOT CUDAToolkit_ROOT)
  foreach(_h ${_vdnn_cuda_hints})
    if(EXISTS "${_h}/bin/nvcc")
      set(CUDAToolkit_ROOT "${_h}")
      break()
    endif()
  endforeach()
endif()

find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart OR NOT TARGET CUDA::cublas)
  message(STATUS "vdnn: no CUDA toolkit found; building without the CUDA backend")
  return()
endif()

# check_language() tries the compiler in a scratch project, so a broken nvcc turns the backend off
# instead of failing the whole configure.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE)
  set(ENV{CUDACXX} "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "vdnn: CUDA toolkit ${CUDAToolkit_VERSION} found but nvcc does not work; building without the CUDA backend")
  return()
endif()

find_library(VDNN_CUDNN_LIB NAMES cudnn
             HINTS ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib64" "${CUDAToolkit_LIBRARY_ROOT}/lib"
             PATH_SUFFIXES lib64 lib)
find_path(VDNN_CUDNN_INCLUDE NAMES cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
if(NOT VDNN_CUDNN_LIB OR NOT VDNN_CUDNN_INCLUDE)
  message(STATUS "vdnn: CUDA toolkit found but not cuDNN (cudnn.h and libcudnn); building without the CUDA backend")
  return()
endif()
file(STRINGS "${VDNN_CUDNN_INCLUDE}/cudnn_version.h" _vdnn_cudnn_major REGEX "^#define CUDNN_MAJOR [0-9]+")
string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" _vdnn_cudnn_major "${_vdnn_cudnn_major}")
if(NOT _vdnn_cudnn_major OR _vdnn_cudnn_major LESS 9)
  message(STATUS "vdnn: cuDNN ${_vdnn_cudnn_major} is older than 9; building without the CUDA backend")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES ${VDNN_CUDA_ARCHITECTURES})
endif()
# One runtime for the whole program, the shared libcudart that cuDNN and cuBLAS use too. Set for every target
# made from here on: C executables that link vdnn_cuda would otherwise get the static runtime as well.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

file(GLOB VDNN_CUDA_SOURCES CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.c ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cu)
add_library(vdnn_cuda STATIC ${VDNN_CUDA_SOURCES})

# The directory-wide options (-Wall ... -Werror, sanitizers) are gcc flags nvcc does not take: keep them
# for the C files and give the .cu files nvcc's equivalents.
get_target_property(_vdnn_dir_opts vdnn_cuda COMPILE_OPTIONS)
set(_vdnn_c_opts)
if(_vdnn_dir_opts)
  foreach(_o ${_vdnn_dir_opts})
    list(APPEND _vdnn_c_opts "$<$<COMPILE_LANGUAGE:C>:${_o}>")
  endforeach()
endif()
set_target_properties(vdnn_cuda PROPERTIES
  COMPILE_OPTIONS "${_vdnn_c_opts}"
  CUDA_ARCHITECTURES "${VDNN_CUDA_ARCHITECTURES}")
target_compile_options(vdnn_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror,-Wno-unused-parameter>)
target_include_directories(vdnn_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${VDNN_CUDNN_INCLUDE})
target_link_libraries(vdnn_cuda PUBLIC vdnn CUDA::cudart ${VDNN_CUDNN_LIB} CUDA::cublas)
# Code that links vdnn_cuda may call what backend/cuda/cuda_backend.h declares only when this is defined
# (the stand-in src/backend/cuda_absent.c defines vdnn_backend_cuda_create alone).
target_compile_definitions(vdnn_cuda INTERFACE VDNN_HAVE_CUDA=1)

set(VDNN_HAVE_CUDA ON)
message(STATUS "vdnn: CUDA backend on (CUDA ${CUDAToolkit_VERSION}, cuDNN ${_vdnn_cudnn_major}, architectures ${VDNN_CUDA_ARCHITECTURES})")
