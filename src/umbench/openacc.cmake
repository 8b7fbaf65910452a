# OpenACC builds of the P000 programs (included by CMakeLists.txt).  The paper's three
# cases are three compilations of one source, so each mode is a binary of its own
# (umb_acc.h): explicit (data directives), managed (no directives, -gpu=managed) and
# both (directives and -gpu=managed).  Only NVHPC has -gpu=managed.
if(NOT UMSTUDY_HAVE_OPENACC)
  if(UMSTUDY_OPENACC STREQUAL "OFF")
    umstudy_report(umbench-openacc OFF "UMSTUDY_OPENACC=OFF")
  else()
    umstudy_report(umbench-openacc OFF "${CMAKE_CXX_COMPILER_ID} has no working OpenACC offloading")
  endif()
  return()
endif()

set(_umb_acc_modes explicit)
if(CMAKE_CXX_COMPILER_ID STREQUAL "NVHPC")
  list(APPEND _umb_acc_modes managed both)
  umstudy_report(umbench-openacc "explicit managed both" "NVHPC")
else()
  umstudy_report(umbench-openacc explicit
    "managed/both need NVHPC (-gpu=managed); ${CMAKE_CXX_COMPILER_ID} builds explicit only")
endif()
if(NOT UMSTUDY_HAVE_MPI)
  umstudy_report(umb-halo-acc OFF "no MPI found")
endif()

foreach(mode IN LISTS _umb_acc_modes)
  set(_flags ${UMSTUDY_OPENACC_FLAGS})
  if(NOT mode STREQUAL "explicit")
    # NVHPC takes one -gpu= list: join the managed suboption to the existing one.
    if(_flags MATCHES "(^|;)-gpu=")
      list(TRANSFORM _flags REPLACE "^-gpu=(.+)$" "-gpu=\\1,managed")
    else()
      list(APPEND _flags -gpu=managed)
    endif()
  endif()
  string(TOUPPER "${mode}" _mode_macro)
  # The shared host code compiled again for each mode and without OpenMP: the OpenACC
  # and OpenMP offload drivers do not mix in one link (as in himeno-acc), and under
  # -gpu=managed every allocation, the host code's included, must be compiled so.
  add_library(umbench_acc_${mode} OBJECT umb_host.cpp umb_analysis.c umb_p000_driver.cpp umb_p000_acc.cpp)
  target_include_directories(umbench_acc_${mode} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(umbench_acc_${mode} PUBLIC umstudy::support)
  target_compile_features(umbench_acc_${mode} PUBLIC cxx_std_17)
  target_compile_definitions(umbench_acc_${mode} PUBLIC UMB_ACC_MODE_${_mode_macro})
  target_compile_options(umbench_acc_${mode} PUBLIC "$<$<COMPILE_LANGUAGE:CXX>:${_flags}>")
  target_link_options(umbench_acc_${mode} INTERFACE ${_flags})

  foreach(prog modes fraction stride)
    add_executable(umb-${prog}-acc-${mode} umb_${prog}.cpp)
    target_link_libraries(umb-${prog}-acc-${mode} PRIVATE umbench_acc_${mode})
    list(APPEND _umb_programs umb-${prog}-acc-${mode})
  endforeach()
  if(UMSTUDY_HAVE_MPI)
    add_executable(umb-halo-acc-${mode} umb_halo_acc.cpp umb_halo_common.cpp)
    target_link_libraries(umb-halo-acc-${mode} PRIVATE umbench_acc_${mode} MPI::MPI_C)
    list(APPEND _umb_programs umb-halo-acc-${mode})
  endif()
endforeach()
