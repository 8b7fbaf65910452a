# Shared by the top-level project and every component built alone (or by Spack):
# one definition of the build options and of the support library.
include_guard(GLOBAL)

set(UMSTUDY_CUDA "AUTO" CACHE STRING "Build CUDA variants: AUTO (if nvcc works), ON, OFF")
set_property(CACHE UMSTUDY_CUDA PROPERTY STRINGS AUTO ON OFF)
set(UMSTUDY_OPENMP "ON" CACHE STRING "Use OpenMP for CPU code: ON, OFF")
set(UMSTUDY_MPI "AUTO" CACHE STRING "Build MPI programs: AUTO, ON, OFF")
set(UMSTUDY_OPENACC "AUTO" CACHE STRING "Build OpenACC variants: AUTO, ON, OFF")
# Hopper by default; a system build passes its own list (systems/<name>/system.yaml).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures")
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# Reports (once) what is built and why not, so nothing is silently left out.
function(umstudy_report what status reason)
  message(STATUS "umstudy: ${what}: ${status} (${reason})")
  set_property(GLOBAL APPEND PROPERTY UMSTUDY_FEATURE_REPORT "${what}=${status}")
endfunction()

# CUDA
set(UMSTUDY_HAVE_CUDA OFF)
if(NOT UMSTUDY_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(UMSTUDY_HAVE_CUDA ON)
    umstudy_report(cuda ON "nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}")
  elseif(UMSTUDY_CUDA STREQUAL "ON")
    message(FATAL_ERROR "UMSTUDY_CUDA=ON but no working CUDA compiler was found (set CMAKE_CUDA_COMPILER or load a CUDA module)")
  else()
    umstudy_report(cuda OFF "no CUDA compiler found")
  endif()
else()
  umstudy_report(cuda OFF "UMSTUDY_CUDA=OFF")
endif()

# OpenMP (CPU side)
set(UMSTUDY_HAVE_OPENMP OFF)
if(UMSTUDY_OPENMP)
  find_package(OpenMP COMPONENTS C CXX)
  if(OpenMP_C_FOUND AND OpenMP_CXX_FOUND)
    set(UMSTUDY_HAVE_OPENMP ON)
  else()
    message(FATAL_ERROR "UMSTUDY_OPENMP=ON but the compiler has no OpenMP support")
  endif()
endif()

# MPI
set(UMSTUDY_HAVE_MPI OFF)
if(NOT UMSTUDY_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(UMSTUDY_HAVE_MPI ON)
  elseif(UMSTUDY_MPI STREQUAL "ON")
    message(FATAL_ERROR "UMSTUDY_MPI=ON but no MPI was found")
  endif()
endif()

# The support library, defined once however many components include this file.
if(NOT TARGET umstudy_support)
  add_library(umstudy_support STATIC ${CMAKE_CURRENT_LIST_DIR}/../support/src/support.c)
  target_include_directories(umstudy_support PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../support/include)
  target_compile_features(umstudy_support PUBLIC c_std_11)
  set_target_properties(umstudy_support PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(umstudy_support PUBLIC m)
  add_library(umstudy::support ALIAS umstudy_support)
endif()

include(GNUInstallDirs)
