/* A stand-in for the CUDA driver library (libcuda.so.1) on machines without one, for the tests of
 * --preload's CUDA check (tests/integration/warm_start_test.cpp): the two entry points that check
 * uses, as the CUDA Driver API documents them. Until cuInit has been called, every driver call but
 * cuInit returns CUDA_ERROR_NOT_INITIALIZED; cuInit(0) initialises the driver and returns
 * CUDA_SUCCESS, or CUDA_ERROR_NO_DEVICE when there is no device (here: when CUDA_STANDIN_NO_DEVICE
 * is set); either way the driver has read CUDA_VISIBLE_DEVICES, and cuDeviceGetCount then counts the
 * devices (1, or 0). */
#include <stdlib.h>

typedef int CUresult;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
};

static int initialised; /* cuInit(0) has been called */
static int devices;     /* what it found */

__attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  initialised = 1;
  devices = getenv("CUDA_STANDIN_NO_DEVICE") != NULL ? 0 : 1;
  return devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetCount(int* count) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = devices;
  return CUDA_SUCCESS;
}
