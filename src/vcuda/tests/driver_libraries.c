/* The CUDA libraries that carry a CUDA runtime of their own (cuBLAS, cuSPARSE, cuFFT),
 * started as a program does, for test_driver_refuse.py's "libraries" case: prints their
 * statuses as one JSON line; exits 3 when any failed to start (as a program that checks
 * its errors ends), 0 when all started. */
#include <stdio.h>

#include <cublas_v2.h>
#include <cufft.h>
#include <cusparse.h>

int main(void)
{
  cublasHandle_t blas;
  cusparseHandle_t sparse;
  cufftHandle fft;
  int b = (int)cublasCreate(&blas);
  int s = (int)cusparseCreate(&sparse);
  int f = (int)cufftPlan1d(&fft, 64, CUFFT_C2C, 1);
  printf("{\"cublasCreate\":%d,\"cusparseCreate\":%d,\"cufftPlan1d\":%d}\n", b, s, f);
  if (b == CUBLAS_STATUS_SUCCESS) cublasDestroy(blas);
  if (s == CUSPARSE_STATUS_SUCCESS) cusparseDestroy(sparse);
  if (f == CUFFT_SUCCESS) cufftDestroy(fft);
  return b || s || f ? 3 : 0;
}
