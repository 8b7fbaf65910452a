// What the OpenACC builds of P000 (umb_p000_acc.cpp, umb_halo_acc.cpp) share.  The
// paper compares three compilations, so the mode is fixed when a binary is compiled:
//   UMB_ACC_MODE_EXPLICIT: data directives on ordinary host memory ("manual");
//   UMB_ACC_MODE_MANAGED:  no data directive at all, NVHPC -gpu=managed ("auto");
//   UMB_ACC_MODE_BOTH:     the explicit source compiled with -gpu=managed ("both").
#pragma once
#include <stddef.h>

#ifndef _OPENACC
#error "umb_acc.h: compile with the OpenACC flags (UMSTUDY_OPENACC_FLAGS)"
#endif
#if defined(UMB_ACC_MODE_EXPLICIT) + defined(UMB_ACC_MODE_MANAGED) + defined(UMB_ACC_MODE_BOTH) != 1
#error "define exactly one of UMB_ACC_MODE_EXPLICIT, UMB_ACC_MODE_MANAGED, UMB_ACC_MODE_BOTH"
#endif
#if !defined(UMB_ACC_MODE_EXPLICIT) && !defined(__NVCOMPILER)
#error "the managed and both modes need NVHPC (-gpu=managed)"
#endif

#if defined(UMB_ACC_MODE_EXPLICIT)
#define UMB_ACC_MODE "explicit"
#elif defined(UMB_ACC_MODE_MANAGED)
#define UMB_ACC_MODE "managed"
#else
#define UMB_ACC_MODE "both"
#endif

// UMB_ACC_DATA(directive): a data directive that exists in the directive modes and is
// absent from the managed source, which is how the paper's "auto" program was written.
#define UMB_ACC_PRAGMA(text) _Pragma(#text)
#if defined(UMB_ACC_MODE_MANAGED)
#define UMB_ACC_DATA(directive)
#else
#define UMB_ACC_DATA(directive) UMB_ACC_PRAGMA(acc directive)
#endif

// OpenACC accelerators visible (0: compute regions would run on the host).
int umb_acc_devices(void);
// In the explicit mode, exits 77 unless `bytes` more fit in the free memory of the
// selected accelerator (5% margin), naming `what`; managed memory may oversubscribe.
void umb_acc_require(size_t bytes, const char *what);
