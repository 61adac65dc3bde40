/* NVML's public types as nvml.h lays them out (API 13: docs/design/nvml-facts.md), written out for the
 * stand-in NVML (nvml_standin.c) and its self-test (nvml_standin_selftest.c), which share them so that
 * the self-test calls the stand-in with the same layouts a real NVML caller uses. No nvml.h here. */
#ifndef DDPRUN_NVML_STANDIN_TYPES_H
#define DDPRUN_NVML_STANDIN_TYPES_H

struct nvmlDevice_st;
typedef struct { struct nvmlDevice_st* handle; } nvmlDevice_t;
struct nvmlEventSet_st;
typedef struct { struct nvmlEventSet_st* handle; } nvmlEventSet_t;
typedef int nvmlTemperatureSensors_t;  /* NVML_TEMPERATURE_GPU = 0 */
typedef int nvmlEnableState_t;         /* DISABLED 0, ENABLED 1 */
typedef int nvmlMemoryErrorType_t;     /* CORRECTED 0, UNCORRECTED 1 */
typedef int nvmlEccCounterType_t;      /* VOLATILE 0, AGGREGATE 1 */
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

#endif
