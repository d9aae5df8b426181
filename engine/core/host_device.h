// host_device.h: TD_HOST_DEVICE marks a function that CUDA device code calls too (nvcc compiles
// it for both sides); for the host compilers the macro is empty.
#pragma once

#ifdef __CUDACC__
#define TD_HOST_DEVICE __host__ __device__
#else
#define TD_HOST_DEVICE
#endif
