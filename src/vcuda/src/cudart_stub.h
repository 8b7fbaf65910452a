/* The generated stubs (see CMakeLists.txt): a runtime export vcuda does not remote
 * returns cudaErrorNotSupported and says so on stderr, once per function.  Declared
 * without parameters on purpose: the caller's arguments are ignored (x86-64 and
 * AArch64 calling conventions let a callee ignore them), and every such function
 * returns cudaError_t (an int); the exports that return something else are all
 * defined in the cudart_*.c families. */
#ifndef VCUDA_CUDART_STUB_H
#define VCUDA_CUDART_STUB_H

int vcuda_cudart_unsupported(const char *name, int *said);

#define VCUDA_UNSUPPORTED(name)                                                           \
    static int said_##name;                                                               \
    __attribute__((weak, visibility("default"))) int name(void);                          \
    int name(void) { return vcuda_cudart_unsupported(#name, &said_##name); }

#endif
