/* A library that reaches the CUDA driver the way one with a CUDA runtime of its own
 * inside does (cuBLAS, cuSPARSE, cuFFT): dlopen("libcuda.so.1"), then dlsym. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*init_fn)(unsigned);
typedef int (*proc_fn)(const char *, void **, int, unsigned long long, int *);

/* cuInit's result, or -1 when the driver cannot be opened; *via_proc: what a function
 * cuGetProcAddress_v2 hands out returns (-1 if none). */
__attribute__((visibility("default"))) int driver_caller_init(int *via_proc)
{
  *via_proc = -1;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "driver_caller: %s\n", dlerror());
    return -1;
  }
  init_fn init = (init_fn)dlsym(h, "cuInit");
  proc_fn proc = (proc_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!init || !proc) {
    fprintf(stderr, "driver_caller: libcuda.so.1 lacks cuInit or cuGetProcAddress_v2\n");
    return -1;
  }
  int rc = init(0);
  void *pfn = NULL;
  int status = 0;
  int prc = proc("cuDeviceGetCount", &pfn, 12000, 0, &status);
  if (prc != 0 && pfn) *via_proc = ((init_fn)pfn)(0);
  return rc;
}
