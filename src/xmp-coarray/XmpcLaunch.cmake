# How to start an xmpc program on N images with a given backend, for tests (here and in
# programs built on xmpc):  xmpc_launch(<cmd-var> <env-var> <backend> <N>) sets
# <cmd-var> to the launcher words to put before the program and <env-var> to the
# ENVIRONMENT entries the test needs.
#   mpi3, armci, gasnet/mpi conduit   mpiexec -n N (Open MPI: --oversubscribe, and
#                                     allowed to run as root in containers)
#   gasnet/smp conduit                GASNET_PSHM_NODES=N ./prog (GASNet forks them)
#   gasnet/udp conduit                amudprun -np N ./prog, spawning locally
include_guard(GLOBAL)

function(xmpc_launch cmd_var env_var backend np)
  # Asked here, not at include time: include_guard(GLOBAL) would leave a variable set
  # only in the directory that included this file first.
  if(MPIEXEC_EXECUTABLE AND NOT DEFINED CACHE{XMPC_MPIEXEC_VERSION})
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _v ERROR_QUIET)
    set(XMPC_MPIEXEC_VERSION "${_v}" CACHE INTERNAL "mpiexec --version")
  endif()
  set(_xmpc_mpiexec_version "${XMPC_MPIEXEC_VERSION}")
  set(_env XMPC_BACKEND=${backend})
  set(_cmd)
  if(backend STREQUAL "gasnet" AND XMPC_GASNET_CONDUIT STREQUAL "smp")
    list(APPEND _env GASNET_PSHM_NODES=${np})
  elseif(backend STREQUAL "gasnet" AND XMPC_GASNET_CONDUIT STREQUAL "udp")
    set(_cmd ${GASNET_ROOT}/bin/amudprun -np ${np})
    list(APPEND _env GASNET_SPAWNFN=L)
  elseif(MPIEXEC_EXECUTABLE)
    set(_cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np})
    if(_xmpc_mpiexec_version MATCHES "OpenRTE|Open MPI")
      list(APPEND _cmd --oversubscribe)
    endif()
    list(APPEND _cmd ${MPIEXEC_PREFLAGS})
  else()
    set(_cmd NOTFOUND)
  endif()
  # Open MPI refuses root without these; MPICH ignores them.
  list(APPEND _env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  set(${cmd_var} "${_cmd}" PARENT_SCOPE)
  set(${env_var} "${_env}" PARENT_SCOPE)
endfunction()
