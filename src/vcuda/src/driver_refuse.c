/* The client side's libcuda.so.1: it refuses, by name, every CUDA driver call.
 *
 * vcuda remotes the CUDA runtime API (the libcudart stand-in beside this file).  Some
 * programs reach the driver without it: cuBLAS, cuBLASLt, cuSPARSE, cuFFT, ... carry a
 * CUDA runtime of their own, linked in statically, which dlopens "libcuda.so.1"; a
 * program may also call the driver API itself (nvcc -lcuda).  With the machine's real
 * driver those calls run locally, on pointers that belong to a remote server: wrong
 * answers or a crash.  This library sits first on the program's library path (vcuda-run,
 * vcuda-launch: never the servers', which need the real driver), so such a program
 * finds it instead, is told on one line of stderr which library called the driver, and
 * gets an error it knows how to report.
 *
 * The error is CUDA_ERROR_NO_DEVICE: it is what the real driver's cuInit answers on a
 * machine with a driver and no usable GPU (CUDA_VISIBLE_DEVICES=""), the state every
 * library is written to meet -- the runtime inside turns it into cudaErrorNoDevice, and
 * cublasCreate, cusparseCreate and cufftPlan* return their "not initialized" / "setup
 * failed" status instead of going on.  CUDA_ERROR_NOT_SUPPORTED would be truthful too,
 * but it is an answer the driver gives about one feature of a working device, which a
 * caller may take as "try another way" and go on to the next driver call.
 *
 * Every function the toolkit's libcuda exports is here (the named ones below, the rest
 * generated as weak stubs from the toolkit's stub library, see CMakeLists.txt), so
 * dlsym never hands a caller NULL, and cuGetProcAddress hands out a refusing function
 * as well as its error, for a caller that does not look at the status. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "driver_refuse.h"

#define NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */

/* One line per calling library, not one per call: a library that tries a dozen entry
 * points says so once.  The table is small and lock-free (the callers may be threads of
 * a program that never expected to share it); past its end, lines may repeat. */
#define SEEN_MAX 32
static const void *seen[SEEN_MAX];

static int first_time(const void *base)
{
  for (int i = 0; i < SEEN_MAX; i++) {
    const void *cur = __atomic_load_n(&seen[i], __ATOMIC_ACQUIRE);
    if (cur == base) return 0;
    if (cur == NULL) {
      const void *expected = NULL;
      if (__atomic_compare_exchange_n(&seen[i], &expected, base, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 1;
      if (expected == base) return 0;
    }
  }
  return 1;
}

int vcuda_driver_refuse(const void *caller, const char *fn)
{
  Dl_info info;
  const char *who = NULL;
  const void *base = caller;
  char exe[4096];
  if (caller && dladdr(caller, &info) && info.dli_fname) {
    base = info.dli_fbase;
    if (info.dli_fname[0]) who = info.dli_fname;
  }
  if (!who) { /* the main program: dladdr names it "" */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    who = n > 0 ? exe : "the program";
  }
  if (!base) base = seen; /* a caller dladdr cannot place (generated code): one key for all */
  if (!first_time(base)) return NO_DEVICE;
  const char *slash = strrchr(who, '/');
  char line[1024];
  int len = snprintf(line, sizeof line,
                     "vcuda: %s calls the CUDA driver directly (%s; a CUDA runtime of its own inside, or "
                     "the driver API); vcuda remotes the CUDA runtime API only, so this program cannot "
                     "run under vcuda\n",
                     slash ? slash + 1 : who, fn);
  /* one write: lines from threads do not interleave */
  if (len > 0) {
    ssize_t w = write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    (void)w;
  }
  return NO_DEVICE;
}

/* The entry points a runtime or library resolves by name first (CUDA 13.0's
 * libcudart_static.a names cuInit, cuDriverGetVersion, cuGetProcAddress(_v2) and
 * cuGetExportTable, and takes the rest from cuGetProcAddress; cuBLASLt also dlsyms the
 * module and kernel calls), written out so that their outputs are left in a defined
 * state besides the error. */
#define CALLER __builtin_return_address(0)

DRV_EXPORT int cuInit(unsigned flags)
{
  (void)flags;
  return vcuda_driver_refuse(CALLER, "cuInit");
}

DRV_EXPORT int cuDriverGetVersion(int *version)
{
  if (version) *version = 0;
  return vcuda_driver_refuse(CALLER, "cuDriverGetVersion");
}

DRV_EXPORT int cuDeviceGetCount(int *count)
{
  if (count) *count = 0;
  return vcuda_driver_refuse(CALLER, "cuDeviceGetCount");
}

DRV_EXPORT int cuDeviceGet(int *device, int ordinal)
{
  (void)ordinal;
  if (device) *device = -1;
  return vcuda_driver_refuse(CALLER, "cuDeviceGet");
}

DRV_EXPORT int cuGetExportTable(const void **table, const void *id)
{
  (void)id;
  if (table) *table = NULL;
  return vcuda_driver_refuse(CALLER, "cuGetExportTable");
}

/* Any function it hands out: refuses, named after no symbol (the caller asked by name
 * and did not get it). */
static int refused_entry(void)
{
  return vcuda_driver_refuse(CALLER, "a function from cuGetProcAddress");
}

DRV_EXPORT int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
  (void)symbol, (void)version, (void)flags;
  if (pfn) *pfn = (void *)refused_entry;
  return vcuda_driver_refuse(CALLER, "cuGetProcAddress");
}

DRV_EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                                   int *symbol_status)
{
  (void)symbol, (void)version, (void)flags;
  if (pfn) *pfn = (void *)refused_entry;
  if (symbol_status) *symbol_status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return vcuda_driver_refuse(CALLER, "cuGetProcAddress");
}

/* What a library prints for the error it got: the driver's own words for
 * CUDA_ERROR_NO_DEVICE, and for anything else a plain "unknown" (this library gives no
 * other error); a success, as the real driver's, for a caller that formats its message
 * before it gives up (left untouched, its pointer would be whatever it held). */
DRV_EXPORT int cuGetErrorName(int error, const char **name)
{
  if (!name) return 1; /* CUDA_ERROR_INVALID_VALUE */
  *name = error == NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}

DRV_EXPORT int cuGetErrorString(int error, const char **text)
{
  if (!text) return 1; /* CUDA_ERROR_INVALID_VALUE */
  *text = error == NO_DEVICE ? "no CUDA-capable device is detected (vcuda: the CUDA driver is not remoted)"
                             : "unknown error";
  return 0;
}
