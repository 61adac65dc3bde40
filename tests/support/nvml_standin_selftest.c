/* The stand-in NVML's own test (ctest support.nvml_standin): dlopens the library named by argv[1]
 * (build/tests/nvml_standin/libnvidia-ml.so.1), writes control files (see nvml_standin.c) and
 * checks every exported call's documented results and error codes. Prints each mismatch and exits
 * 1 if there was any. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#include "nvml_standin_types.h"

enum { SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NO_PERMISSION = 4, NOT_FOUND = 6,
       INSUFFICIENT_SIZE = 7, DRIVER_NOT_LOADED = 9, TIMEOUT = 10, GPU_IS_LOST = 15, UNKNOWN = 999 };

static nvmlReturn_t (*Init)(void), (*InitWithFlags)(unsigned int), (*Shutdown)(void);
static const char* (*ErrorString)(nvmlReturn_t);
static nvmlReturn_t (*DriverVersion)(char*, unsigned int), (*Count)(unsigned int*);
static nvmlReturn_t (*ByIndex)(unsigned int, nvmlDevice_t*), (*ByUUID)(const char*, nvmlDevice_t*),
    (*ByPci)(const char*, nvmlDevice_t*);
static nvmlReturn_t (*Index)(nvmlDevice_t, unsigned int*), (*UUID)(nvmlDevice_t, char*, unsigned int),
    (*Name)(nvmlDevice_t, char*, unsigned int), (*Pci)(nvmlDevice_t, nvmlPciInfo_t*),
    (*Minor)(nvmlDevice_t, unsigned int*);
static nvmlReturn_t (*Util)(nvmlDevice_t, nvmlUtilization_t*), (*Mem)(nvmlDevice_t, nvmlMemory_t*),
    (*Procs)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*), (*Temp)(nvmlDevice_t, int, unsigned int*),
    (*Power)(nvmlDevice_t, unsigned int*), (*Throttle)(nvmlDevice_t, unsigned long long*),
    (*ClockEvents)(nvmlDevice_t, unsigned long long*);
static nvmlReturn_t (*Ecc)(nvmlDevice_t, int, int, unsigned long long*), (*Retired)(nvmlDevice_t, int*),
    (*Remapped)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*);
static nvmlReturn_t (*SetCreate)(nvmlEventSet_t*), (*Register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t),
    (*Supported)(nvmlDevice_t, unsigned long long*), (*Wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int),
    (*SetFree)(nvmlEventSet_t);

static int failures;
static char control[4096];

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)
#define RC(call, want)                                                                          \
  do {                                                                                          \
    nvmlReturn_t got_ = (call);                                                                 \
    if (got_ != (want)) {                                                                       \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, \
              #call, got_, (int)(want), #want);                                                 \
      ++failures;                                                                               \
    }                                                                                           \
  } while (0)

/* Replaces the control file as a test should: a new file renamed over the old one. */
static void write_control(const char* text) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.new", control);
  FILE* f = fopen(tmp, "w");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, control) != 0) {
    perror("writing the control file");
    exit(2);
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void* sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "FAILED: %s not exported\n", name);
    exit(1);
  }
  return p;
}

static const char* base =
    "# two GPUs\n"
    "gpu 0 uuid=GPU-11111111-2222-3333-4444-555555555555 bus=00000000:17:00.0 name=\"NVIDIA H100 80GB HBM3\" "
    "util=87 memutil=40 mem_total=85899345920 mem_used=1234 temp=61 power_mw=350000 throttle=0x4 "
    "ecc_uncorrected=2 ecc_corrected=5 ecc_uncorrected_agg=9 retired_pending=1 remapped_corrected=3 "
    "remapped_uncorrected=1 remapped_pending=1 minor=7\n"
    "gpu 1 uuid=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee bus=0001:3b:00.0 name=\"NVIDIA GeForce RTX 4090\" ecc=0\n"
    "proc 0 pid=1234 used=1048576\n"
    "proc 1 pid=99 used=NA\n"
    "proc 0 pid=1235 used=2097152\n"
    "some future directive\n";

static void* release_later(void* text) {
  struct timespec ts = {0, 300 * 1000000L};
  nanosleep(&ts, NULL);
  write_control((const char*)text);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s /path/to/libnvidia-ml.so.1\n", argv[0]);
    return 2;
  }
  const char* tmpdir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/nvml_standin_selftest.XXXXXX", tmpdir);
  if (mkdtemp(dir) == NULL) { perror("mkdtemp"); return 2; }
  snprintf(control, sizeof control, "%s/control", dir);
  setenv("DDPRUN_NVML_STANDIN", control, 1);

  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) { fprintf(stderr, "FAILED: dlopen: %s\n", dlerror()); return 1; }
  *(void**)&Init = sym(lib, "nvmlInit_v2");
  *(void**)&InitWithFlags = sym(lib, "nvmlInitWithFlags");
  *(void**)&Shutdown = sym(lib, "nvmlShutdown");
  *(void**)&ErrorString = sym(lib, "nvmlErrorString");
  *(void**)&DriverVersion = sym(lib, "nvmlSystemGetDriverVersion");
  *(void**)&Count = sym(lib, "nvmlDeviceGetCount_v2");
  *(void**)&ByIndex = sym(lib, "nvmlDeviceGetHandleByIndex_v2");
  *(void**)&ByUUID = sym(lib, "nvmlDeviceGetHandleByUUID");
  *(void**)&ByPci = sym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void**)&Index = sym(lib, "nvmlDeviceGetIndex");
  *(void**)&UUID = sym(lib, "nvmlDeviceGetUUID");
  *(void**)&Name = sym(lib, "nvmlDeviceGetName");
  *(void**)&Pci = sym(lib, "nvmlDeviceGetPciInfo_v3");
  *(void**)&Minor = sym(lib, "nvmlDeviceGetMinorNumber");
  *(void**)&Util = sym(lib, "nvmlDeviceGetUtilizationRates");
  *(void**)&Mem = sym(lib, "nvmlDeviceGetMemoryInfo");
  *(void**)&Procs = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  *(void**)&Temp = sym(lib, "nvmlDeviceGetTemperature");
  *(void**)&Power = sym(lib, "nvmlDeviceGetPowerUsage");
  *(void**)&Throttle = sym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
  *(void**)&ClockEvents = sym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
  *(void**)&Ecc = sym(lib, "nvmlDeviceGetTotalEccErrors");
  *(void**)&Retired = sym(lib, "nvmlDeviceGetRetiredPagesPendingStatus");
  *(void**)&Remapped = sym(lib, "nvmlDeviceGetRemappedRows");
  *(void**)&SetCreate = sym(lib, "nvmlEventSetCreate");
  *(void**)&Register = sym(lib, "nvmlDeviceRegisterEvents");
  *(void**)&Supported = sym(lib, "nvmlDeviceGetSupportedEventTypes");
  *(void**)&Wait = sym(lib, "nvmlEventSetWait_v2");
  *(void**)&SetFree = sym(lib, "nvmlEventSetFree");

  unsigned int n = 0, u = 0;
  unsigned long long ull = 0;
  char buf[128];
  nvmlDevice_t d0, d1, d;

  /* Error strings: NVML's texts, never NULL. */
  CHECK(strcmp(ErrorString(SUCCESS), "Success") == 0);
  CHECK(strcmp(ErrorString(UNINITIALIZED), "Uninitialized") == 0);
  CHECK(strcmp(ErrorString(NOT_SUPPORTED), "Not Supported") == 0);
  CHECK(strcmp(ErrorString(NO_PERMISSION), "Insufficient Permissions") == 0);
  CHECK(strcmp(ErrorString(GPU_IS_LOST), "GPU is lost") == 0);
  CHECK(strcmp(ErrorString(16), "GPU requires restart") == 0);
  CHECK(strcmp(ErrorString(UNKNOWN), "Unknown Error") == 0);
  CHECK(strcmp(ErrorString(12345), "Unknown Error") == 0);

  /* Before init: UNINITIALIZED; a missing file is no GPU. */
  RC(Count(&n), UNINITIALIZED);
  RC(ByIndex(0, &d), UNINITIALIZED);
  RC(DriverVersion(buf, sizeof buf), UNINITIALIZED);
  RC(Shutdown(), UNINITIALIZED);
  RC(Init(), SUCCESS);
  RC(Count(&n), SUCCESS);
  CHECK(n == 0);
  RC(ByIndex(0, &d), INVALID_ARGUMENT);
  RC(Shutdown(), SUCCESS);

  /* init_error: init fails and stays failed. */
  write_control("init_error DRIVER_NOT_LOADED\n");
  RC(Init(), DRIVER_NOT_LOADED);
  RC(InitWithFlags(0), DRIVER_NOT_LOADED);
  RC(Count(&n), UNINITIALIZED);

  /* Reference-counted init. */
  write_control(base);
  RC(Init(), SUCCESS);
  RC(InitWithFlags(1), SUCCESS);
  RC(Shutdown(), SUCCESS);
  RC(Count(&n), SUCCESS);
  CHECK(n == 2);
  RC(Count(NULL), INVALID_ARGUMENT);

  RC(DriverVersion(buf, sizeof buf), SUCCESS);
  CHECK(strcmp(buf, "550.54.15") == 0);
  RC(DriverVersion(buf, 9), INSUFFICIENT_SIZE);
  RC(DriverVersion(buf, 10), SUCCESS);
  RC(DriverVersion(NULL, 80), INVALID_ARGUMENT);

  /* Handles. */
  RC(ByIndex(0, &d0), SUCCESS);
  RC(ByIndex(1, &d1), SUCCESS);
  RC(ByIndex(2, &d), INVALID_ARGUMENT);
  RC(ByIndex(0, NULL), INVALID_ARGUMENT);
  RC(Index(d1, &u), SUCCESS);
  CHECK(u == 1);
  nvmlDevice_t bogus = {&u};
  RC(Index(bogus, &u), INVALID_ARGUMENT);
  RC(Index(d0, NULL), INVALID_ARGUMENT);
  RC(ByUUID("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", &d), SUCCESS);
  CHECK(d.handle == d1.handle);
  RC(ByUUID("GPU-aaaaaaaa", &d), NOT_FOUND); /* no prefix matching */
  RC(ByUUID(NULL, &d), INVALID_ARGUMENT);
  RC(ByPci("00000000:17:00.0", &d), SUCCESS);
  CHECK(d.handle == d0.handle);
  RC(ByPci("0000:17:00.0", &d), SUCCESS);
  RC(ByPci("17:00.0", &d), SUCCESS);
  CHECK(d.handle == d0.handle);
  RC(ByPci("00000001:3B:00", &d), SUCCESS);
  CHECK(d.handle == d1.handle);
  RC(ByPci("00000000:18:00.0", &d), NOT_FOUND);
  RC(ByPci("not a bus id", &d), INVALID_ARGUMENT);

  /* Strings: INSUFFICIENT_SIZE when shorter than the string and its NUL. */
  RC(UUID(d0, buf, 96), SUCCESS);
  CHECK(strcmp(buf, "GPU-11111111-2222-3333-4444-555555555555") == 0);
  RC(UUID(d0, buf, 41), SUCCESS);
  RC(UUID(d0, buf, 40), INSUFFICIENT_SIZE);
  RC(UUID(d0, NULL, 96), INVALID_ARGUMENT);
  RC(Name(d1, buf, 96), SUCCESS);
  CHECK(strcmp(buf, "NVIDIA GeForce RTX 4090") == 0);
  RC(Name(d1, buf, 23), INSUFFICIENT_SIZE);

  nvmlPciInfo_t pci;
  RC(Pci(d1, &pci), SUCCESS);
  CHECK(strcmp(pci.busId, "00000001:3B:00.0") == 0);
  CHECK(strcmp(pci.busIdLegacy, "0001:3B:00.0") == 0);
  CHECK(pci.domain == 1 && pci.bus == 0x3b && pci.device == 0 && pci.pciDeviceId == 0x233010DEu);
  RC(Pci(d1, NULL), INVALID_ARGUMENT);
  RC(Minor(d0, &u), SUCCESS);
  CHECK(u == 7);
  RC(Minor(d1, &u), SUCCESS);
  CHECK(u == 1);

  /* State. */
  nvmlUtilization_t util;
  RC(Util(d0, &util), SUCCESS);
  CHECK(util.gpu == 87 && util.memory == 40);
  nvmlMemory_t mem;
  RC(Mem(d0, &mem), SUCCESS);
  CHECK(mem.total == 85899345920ULL && mem.used == 1234 && mem.free == 85899345920ULL - 1234);
  RC(Temp(d0, 0, &u), SUCCESS);
  CHECK(u == 61);
  RC(Temp(d0, 1, &u), INVALID_ARGUMENT);
  RC(Power(d0, &u), SUCCESS);
  CHECK(u == 350000);
  RC(Throttle(d0, &ull), SUCCESS);
  CHECK(ull == 0x4);
  RC(ClockEvents(d0, &ull), SUCCESS);
  CHECK(ull == 0x4);
  RC(Power(d0, NULL), INVALID_ARGUMENT);

  /* Health. */
  RC(Ecc(d0, 1, 0, &ull), SUCCESS);
  CHECK(ull == 2);
  RC(Ecc(d0, 1, 1, &ull), SUCCESS);
  CHECK(ull == 9);
  RC(Ecc(d0, 0, 0, &ull), SUCCESS);
  CHECK(ull == 5);
  RC(Ecc(d0, 0, 1, &ull), SUCCESS);
  CHECK(ull == 5);
  RC(Ecc(d0, 2, 0, &ull), INVALID_ARGUMENT);
  RC(Ecc(d0, 1, 2, &ull), INVALID_ARGUMENT);
  RC(Ecc(d1, 1, 0, &ull), NOT_SUPPORTED);
  int pending = 0;
  RC(Retired(d0, &pending), SUCCESS);
  CHECK(pending == 1);
  RC(Retired(d1, &pending), NOT_SUPPORTED);
  unsigned int rc_, ru, rp, rf;
  RC(Remapped(d0, &rc_, &ru, &rp, &rf), SUCCESS);
  CHECK(rc_ == 3 && ru == 1 && rp == 1 && rf == 0);
  RC(Remapped(d0, &rc_, NULL, &rp, &rf), INVALID_ARGUMENT);
  RC(Remapped(d1, &rc_, &ru, &rp, &rf), NOT_SUPPORTED);

  /* The process list's INSUFFICIENT_SIZE protocol. */
  nvmlProcessInfo_t infos[4];
  memset(infos, 0xAB, sizeof infos);
  n = 0;
  RC(Procs(d0, &n, NULL), INSUFFICIENT_SIZE);
  CHECK(n == 2);
  n = 1;
  RC(Procs(d0, &n, infos), INSUFFICIENT_SIZE);
  CHECK(n == 2);
  CHECK(infos[0].pid == 0xABABABABu); /* untouched */
  n = 4;
  RC(Procs(d0, &n, infos), SUCCESS);
  CHECK(n == 2);
  CHECK(infos[0].pid == 1234 && infos[0].usedGpuMemory == 1048576 && infos[1].pid == 1235 &&
        infos[1].usedGpuMemory == 2097152);
  CHECK(infos[0].gpuInstanceId == 0xFFFFFFFFu && infos[0].computeInstanceId == 0xFFFFFFFFu);
  n = 1;
  RC(Procs(d1, &n, infos), SUCCESS);
  CHECK(n == 1 && infos[0].pid == 99 && infos[0].usedGpuMemory == ~0ULL);
  RC(Procs(d0, NULL, infos), INVALID_ARGUMENT);
  n = 4;
  RC(Procs(d0, &n, NULL), INVALID_ARGUMENT);

  /* A live rewrite: the memory held by the dead pid is released, no process left. */
  write_control("gpu 0 util=3 mem_total=100 mem_used=0\n");
  RC(Count(&n), SUCCESS);
  CHECK(n == 1);
  RC(Util(d0, &util), SUCCESS);
  CHECK(util.gpu == 3);
  n = 0;
  RC(Procs(d0, &n, NULL), SUCCESS);
  CHECK(n == 0);
  RC(Util(d1, &util), INVALID_ARGUMENT); /* GPU 1 no longer exists */

  /* Injected errors and a lost GPU. */
  write_control(
      "gpu 0 power_mw=1\n"
      "gpu 1 uuid=GPU-1\n"
      "gpu 2 uuid=GPU-2 bus=00000000:40:00.0\n"
      "gpu 3 uuid=GPU-3\n"
      "error 0 nvmlDeviceGetPowerUsage NOT_SUPPORTED\n"
      "error 2 nvmlDeviceGetHandleByIndex_v2 NVML_ERROR_NO_PERMISSION\n"
      "error * nvmlDeviceGetTemperature 999\n"
      "lost 1\n");
  RC(Count(&n), SUCCESS);
  CHECK(n == 4);
  RC(Power(d0, &u), NOT_SUPPORTED);
  RC(Power(d0, NULL), INVALID_ARGUMENT); /* argument checks first */
  RC(Temp(d0, 0, &u), UNKNOWN);
  RC(ByIndex(2, &d), NO_PERMISSION);
  RC(ByIndex(1, &d), GPU_IS_LOST);
  RC(ByPci("00000000:40:00.0", &d), SUCCESS); /* only the index lookup was refused */
  RC(ByUUID("GPU-3", &d), GPU_IS_LOST);        /* the search meets the lost GPU 1 */
  RC(Util(d1, &util), GPU_IS_LOST);
  RC(Mem(d1, &mem), GPU_IS_LOST);
  RC(UUID(d1, buf, 96), GPU_IS_LOST);
  RC(Procs(d1, &n, infos), GPU_IS_LOST);
  RC(Retired(d1, &pending), GPU_IS_LOST);
  RC(Remapped(d1, &rc_, &ru, &rp, &rf), GPU_IS_LOST);
  RC(Ecc(d1, 1, 0, &ull), GPU_IS_LOST);

  /* A stalled call, and one released by a rewrite. */
  write_control("gpu 0 util=5\nsleep nvmlDeviceGetUtilizationRates 300\n");
  long long t0 = now_ms();
  RC(Util(d0, &util), SUCCESS);
  long long took = now_ms() - t0;
  CHECK(took >= 290 && took < 2000);
  t0 = now_ms();
  RC(Mem(d0, &mem), SUCCESS); /* other calls do not stall */
  CHECK(now_ms() - t0 < 100);
  write_control("gpu 0 util=6\nsleep nvmlDeviceGetUtilizationRates forever\n");
  pthread_t releaser;
  pthread_create(&releaser, NULL, release_later, (void*)"gpu 0 util=7\n");
  t0 = now_ms();
  RC(Util(d0, &util), SUCCESS);
  took = now_ms() - t0;
  CHECK(took >= 250 && took < 3000);
  CHECK(util.gpu == 7);
  pthread_join(releaser, NULL);

  /* Events. */
  write_control("gpu 0\ngpu 1 ecc=0\nxid 0 13\n");
  nvmlEventSet_t set;
  nvmlEventData_t ev;
  RC(SetCreate(&set), SUCCESS);
  RC(SetCreate(NULL), INVALID_ARGUMENT);
  RC(Supported(d0, &ull), SUCCESS);
  CHECK(ull == 0x1F);
  RC(Supported(d1, &ull), SUCCESS);
  CHECK(ull == 0x1C);
  RC(Register(d1, 0x8 | 0x2, set), NOT_SUPPORTED); /* double-bit ECC without ECC: none registered */
  RC(Register(d0, 0x8 | 0x2, set), SUCCESS);
  t0 = now_ms();
  RC(Wait(set, &ev, 100), TIMEOUT); /* the Xid 13 came before registration: not recorded */
  CHECK(now_ms() - t0 >= 90);
  RC(Wait(set, NULL, 0), INVALID_ARGUMENT);
  write_control("gpu 0\ngpu 1 ecc=0\nxid 0 13\nxid 1 48\nxid 0 79\n");
  RC(Wait(set, &ev, 1000), SUCCESS); /* GPU 1 is not registered: its Xid 48 is not seen */
  CHECK(ev.eventType == 0x8 && ev.eventData == 79 && ev.gpuInstanceId == 0xFFFFFFFFu &&
        ev.computeInstanceId == 0xFFFFFFFFu);
  RC(Index(ev.device, &u), SUCCESS);
  CHECK(u == 0);
  RC(Wait(set, &ev, 0), TIMEOUT); /* delivered once */
  write_control("gpu 0\ngpu 1 ecc=0\nxid 0 13\nxid 1 48\nxid 0 79\nlost 0\n");
  RC(Wait(set, &ev, 0), GPU_IS_LOST);
  RC(SetFree(set), SUCCESS);
  RC(Wait(set, &ev, 0), INVALID_ARGUMENT);

  /* Shutdown to zero: UNINITIALIZED again. */
  RC(Shutdown(), SUCCESS);
  RC(Count(&n), UNINITIALIZED);
  RC(Util(d0, &util), UNINITIALIZED);
  RC(SetCreate(&set), UNINITIALIZED);

  unlink(control);
  rmdir(dir);
  if (failures != 0) {
    fprintf(stderr, "nvml_standin_selftest: %d check(s) failed\n", failures);
    return 1;
  }
  printf("nvml_standin_selftest: all checks passed\n");
  return 0;
}
