/* The refusing libcuda.so.1 (driver_refuse.c): the one function every entry point calls,
 * and the form of the generated ones (every other function the toolkit's libcuda
 * exports, weak, so that the written-out ones in driver_refuse.c take precedence). */
#ifndef VCUDA_DRIVER_REFUSE_H
#define VCUDA_DRIVER_REFUSE_H

#define DRV_EXPORT __attribute__((visibility("default")))

/* Says once per calling library (found from CALLER, a return address) that it calls
 * the driver, naming FN; returns CUDA_ERROR_NO_DEVICE. */
int vcuda_driver_refuse(const void *caller, const char *fn);

/* Driver functions return CUresult; the arguments, whatever they are, stay untouched. */
#define VCUDA_DRIVER_REFUSED(name)                                                                \
  __attribute__((weak)) DRV_EXPORT int name(void);                                                 \
  __attribute__((weak)) DRV_EXPORT int name(void)                                                  \
  {                                                                                                \
    return vcuda_driver_refuse(__builtin_return_address(0), #name);                                \
  }

#endif
