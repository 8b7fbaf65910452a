/* The program for test_driver_refuse.py: its library (driver_caller_lib.c) calls the
 * driver as a library with its own CUDA runtime inside does, and the program itself
 * calls cuDriverGetVersion as a driver-API program does.  Prints the results as one
 * JSON line; exits 3 when the driver refused (the way a program that checks its errors
 * ends), 0 when it answered, 2 when there is no libcuda.so.1 at all. */
#include <dlfcn.h>
#include <stdio.h>

int driver_caller_init(int *via_proc);

int main(void)
{
  int via_proc;
  int init = driver_caller_init(&via_proc);
  if (init == -1) return 2;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*version_fn)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
  if (!version_fn) return 2;
  int version = -1;
  int vrc = version_fn(&version);
  printf("{\"cuInit\":%d,\"from_cuGetProcAddress\":%d,\"cuDriverGetVersion\":%d,\"version\":%d}\n", init, via_proc,
         vrc, version);
  return init != 0 || vrc != 0 ? 3 : 0;
}
