#pragma once
// STRATA_HOST_DEVICE: a function compiled for the host and, under nvcc, for CUDA kernels too
// (the rules that every device follows are written once, in headers that both include).
#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif
