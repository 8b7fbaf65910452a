/* What the per-thread default-stream entry points (cudart_ptds.c) share with the rest
 * of the libcudart stand-in (cudart_stream.c, "the default streams"). */
#ifndef VCUDA_CUDART_PTDS_H
#define VCUDA_CUDART_PTDS_H

/* Set while a _ptsz/_ptds entry point runs: stream 0, and the stream of a call that
 * takes none, are then the calling thread's per-thread default stream. */
extern _Thread_local int vcuda_per_thread_call;

#endif
