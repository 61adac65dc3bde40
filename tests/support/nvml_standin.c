/* A stand-in for NVML (libnvidia-ml.so.1) on machines without an NVIDIA GPU, for the tests of
 * ddprun's GPU sampling, pre-attempt health check and wait for GPU memory release (issue 27).
 * Built as build/tests/nvml_standin/libnvidia-ml.so.1; ddprun loads it through
 * DDPRUN_NVML_LIBRARY=/path/to/libnvidia-ml.so.1. It exports exactly the NVML calls ddprun makes,
 * with NVML's prototypes (types defined here with the documented layouts; no nvml.h), and answers
 * them as NVML documents, error codes included (docs/design/nvml-facts.md, from nvml.h API 13).
 *
 * THE CONTROL FILE. Its path is in the environment variable DDPRUN_NVML_STANDIN. Every call that
 * needs device data looks at it again (a stat; it is parsed again when it changed), so a test may
 * change the answers while ddprun runs: write a new file and rename(2) it over the old one (or
 * append to it; a rewrite in place that keeps the size within one file-time tick may go unseen). A missing file, or one without gpu lines, means no
 * GPU. One directive per line; words are separated by blanks; a value may be "double quoted";
 * `#` starts a comment line; unknown lines and unknown keys are ignored. Numbers are decimal or 0x
 * hex. N is an NVML device index; CALL is an exported function name; CODE is an nvmlReturn_t name
 * (NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED, SUCCESS) or its number.
 *
 *   gpu N key=value...   A GPU. The count is 1 + the highest N (a gap is a GPU with the defaults).
 *       uuid=GPU-...           nvmlDeviceGetUUID, GetHandleByUUID (exact match). Default
 *                              GPU-0000000N-0000-0000-0000-000000000000 (N in hex)
 *       bus=DDDDDDDD:BB:DD.F   PCI address (NVML's busId format; also accepts NVML's other input
 *                              forms). Default 00000000:(0x10+N):00.0
 *       name="..."             nvmlDeviceGetName. Default "NVIDIA H100 80GB HBM3"
 *       util= memutil=         nvmlDeviceGetUtilizationRates, percent (default 0)
 *       mem_total= mem_used=   nvmlDeviceGetMemoryInfo, bytes; free = total - used (default 0)
 *       temp=                  nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU), degrees C
 *       power_mw=              nvmlDeviceGetPowerUsage, milliwatts
 *       throttle=              nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons bit mask
 *       ecc=0|1                ECC enabled (default 1). With ecc=0 the ECC counters, retired pages
 *                              and remapped rows are NOT_SUPPORTED and the ECC event types (0x1,
 *                              0x2) are not supported (a GeForce board)
 *       ecc_corrected= ecc_uncorrected=            volatile ECC counts (default 0)
 *       ecc_corrected_agg= ecc_uncorrected_agg=    aggregate counts (default: the volatile ones)
 *       retired_pending=0|1    nvmlDeviceGetRetiredPagesPendingStatus
 *       remapped_corrected= remapped_uncorrected= remapped_pending=0|1 remapped_failed=0|1
 *                              nvmlDeviceGetRemappedRows
 *       minor=                 nvmlDeviceGetMinorNumber (default N)
 *       pci_id= pci_subsys=    nvmlPciInfo_t pciDeviceId / pciSubSystemId (default 0x233010DE,
 *                              0x16C110DE)
 *       events=                nvmlDeviceGetSupportedEventTypes mask (default 0x1F: ECC single and
 *                              double bit, PState, Xid, Clock; less 0x3 with ecc=0)
 *   proc N pid=P used=BYTES|NA [gi=G] [ci=C]
 *                        A compute process on GPU N (nvmlDeviceGetComputeRunningProcesses_v3, in
 *                        file order). used=NA reports NVML_VALUE_NOT_AVAILABLE (~0ULL); gi and ci
 *                        default to 0xFFFFFFFF (no MIG).
 *   error N|* CALL CODE  CALL on GPU N (on any GPU, and the calls without a GPU, with *) returns
 *                        CODE, after the argument checks. GetHandleByIndex_v2 / ByUUID /
 *                        ByPciBusId_v2 count as calls on the GPU they find, so
 *                        `error 2 nvmlDeviceGetHandleByIndex_v2 NO_PERMISSION` is a GPU the
 *                        user may not open (nvmlDeviceGetCount_v2 still counts it, as in NVML).
 *   lost N               GPU N has fallen off the bus: every call on it returns GPU_IS_LOST (also
 *                        nvmlDeviceGetRemappedRows, whose documented list omits it), so do
 *                        GetHandleByIndex_v2(N), GetHandleByPciBusId_v2 of its address,
 *                        GetHandleByUUID when its search (in index order) reaches GPU N, and
 *                        nvmlEventSetWait_v2 on a set with GPU N registered.
 *   sleep CALL MS|forever
 *                        CALL first sleeps MS milliseconds (a stalled driver), before anything
 *                        else, nvmlInit_v2 included. The file is re-read every 20 ms while it
 *                        sleeps: removing the line (or shortening MS) releases the call early, so
 *                        `forever` hangs until the test rewrites the file.
 *   xid N CODE           An Xid critical error event (type 0x8, eventData CODE) on GPU N.
 *   event N TYPE DATA    Any event type. Events are delivered by nvmlEventSetWait_v2 in file
 *                        order, each once per event set, only to a set with TYPE registered on GPU
 *                        N. As NVML documents, events present when the set registered GPU N are
 *                        not recorded: append the line after ddprun has registered.
 *   init_error CODE      nvmlInit_v2 / nvmlInitWithFlags fail with CODE (DRIVER_NOT_LOADED,
 *                        NO_PERMISSION, ...), and the library stays uninitialised.
 *   driver VERSION       nvmlSystemGetDriverVersion (default 550.54.15).
 *
 * NVML semantics kept: init is reference-counted (every call but nvmlErrorString returns
 * UNINITIALIZED before nvmlInit_v2 or after as many nvmlShutdown; a surplus nvmlShutdown returns
 * UNINITIALIZED); a handle not from this library, a NULL out-pointer, an index >= the count or a bad
 * enum value returns INVALID_ARGUMENT; an unknown UUID or bus id NOT_FOUND; a string buffer shorter
 * than the string plus its NUL INSUFFICIENT_SIZE; the process list's INSUFFICIENT_SIZE protocol
 * (*infoCount set to the count needed, infos untouched); nvmlEventSetWait_v2 TIMEOUT when no event
 * came within timeoutms. The library is thread-safe, as NVML is: a sleeping call blocks only its
 * own thread. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- NVML's types, with the layouts of nvml.h (API 13) ---- */
typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_UNKNOWN = 999,
};
struct nvmlDevice_st { char unused; }; /* a handle points at devices[index] */
#include "nvml_standin_types.h"
_Static_assert(sizeof(nvmlDevice_t) == 8, "nvmlDevice_t");
_Static_assert(sizeof(nvmlPciInfo_t) == 68 && offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24 && offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16, "nvmlProcessInfo_t");
_Static_assert(sizeof(nvmlEventData_t) == 32 && offsetof(nvmlEventData_t, gpuInstanceId) == 24, "nvmlEventData_t");

#define EVENT_XID 0x8ULL
#define EVENT_ECC 0x3ULL
#define NO_INSTANCE 0xFFFFFFFFu

/* ---- the control file ---- */
enum { MAX_GPUS = 64, MAX_PROCS = 1024, MAX_ERRORS = 256, MAX_SLEEPS = 64, MAX_EVENTS = 1024, MAX_SETS = 64 };

struct gpu {
  int present, lost;
  char uuid[96], name[96];
  unsigned int domain, bus, dev, fn;
  unsigned int util, memutil, temp, power_mw, minor, pci_id, pci_subsys;
  unsigned long long mem_total, mem_used, throttle, events;
  int events_set, ecc, agg_c_set, agg_u_set;
  unsigned long long ecc_c, ecc_u, ecc_c_agg, ecc_u_agg;
  unsigned int retired_pending, remap_c, remap_u, remap_pending, remap_failed;
};
struct proc { unsigned int gpu, pid, gi, ci; unsigned long long used; };
struct error { int gpu; /* -1: any */ char call[64]; nvmlReturn_t code; };
struct sleep_rule { char call[64]; long long ms; /* -1: forever */ };
struct event { unsigned int gpu; unsigned long long type, data; };
struct config {
  unsigned int count;
  struct gpu gpus[MAX_GPUS];
  struct proc procs[MAX_PROCS];
  unsigned int nprocs;
  struct error errors[MAX_ERRORS];
  unsigned int nerrors;
  struct sleep_rule sleeps[MAX_SLEEPS];
  unsigned int nsleeps;
  struct event events[MAX_EVENTS];
  unsigned int nevents;
  int init_error;
  char driver[80];
  int refs;  /* the callers holding it, and the cache (load, release): read-only once loaded */
};

static const struct { nvmlReturn_t code; const char* name; const char* text; } codes[] = {
    {0, "SUCCESS", "Success"},
    {1, "UNINITIALIZED", "Uninitialized"},
    {2, "INVALID_ARGUMENT", "Invalid Argument"},
    {3, "NOT_SUPPORTED", "Not Supported"},
    {4, "NO_PERMISSION", "Insufficient Permissions"},
    {5, "ALREADY_INITIALIZED", "Already Initialized"},
    {6, "NOT_FOUND", "Not Found"},
    {7, "INSUFFICIENT_SIZE", "Insufficient Size"},
    {8, "INSUFFICIENT_POWER", "Insufficient External Power"},
    {9, "DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {10, "TIMEOUT", "Timeout"},
    {11, "IRQ_ISSUE", "Interrupt Request Issue"},
    {12, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {13, "FUNCTION_NOT_FOUND", "Function Not Found"},
    {14, "CORRUPTED_INFOROM", "Corrupted infoROM"},
    {15, "GPU_IS_LOST", "GPU is lost"},
    {16, "RESET_REQUIRED", "GPU requires restart"},
    {17, "OPERATING_SYSTEM", "The operating system has blocked the request."},
    {18, "LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch."},
    {19, "IN_USE", NULL},
    {20, "MEMORY", "Insufficient Memory"},
    {21, "NO_DATA", NULL},
    {22, "VGPU_ECC_NOT_SUPPORTED", NULL},
    {23, "INSUFFICIENT_RESOURCES", NULL},
    {24, "FREQ_NOT_SUPPORTED", NULL},
    {25, "ARGUMENT_VERSION_MISMATCH", NULL},
    {26, "DEPRECATED", NULL},
    {27, "NOT_READY", NULL},
    {28, "GPU_NOT_FOUND", NULL},
    {29, "INVALID_STATE", NULL},
    {30, "RESET_TYPE_NOT_SUPPORTED", NULL},
    {999, "UNKNOWN", "Unknown Error"},
};

static int parse_code(const char* s, nvmlReturn_t* out) {
  if (strncasecmp(s, "NVML_ERROR_", 11) == 0) s += 11;
  else if (strncasecmp(s, "NVML_", 5) == 0) s += 5;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; ++i)
    if (strcasecmp(s, codes[i].name) == 0) { *out = codes[i].code; return 1; }
  char* end;
  long v = strtol(s, &end, 0);
  if (*s == '\0' || *end != '\0') return 0;
  *out = (nvmlReturn_t)v;
  return 1;
}

static unsigned long long num(const char* s) { return strtoull(s, NULL, 0); }

/* "%x:%x:%x.%x", "%x:%x:%x" (domain:bus:device) or "%x:%x.%x" (bus:device.function). */
static int parse_bus(const char* s, unsigned int* domain, unsigned int* bus, unsigned int* dev, unsigned int* fn) {
  unsigned int a, b, c, d;
  int n = -1;
  if (sscanf(s, "%x:%x:%x.%x%n", &a, &b, &c, &d, &n) == 4 && n >= 0 && s[n] == '\0') {
    *domain = a, *bus = b, *dev = c, *fn = d;
    return 1;
  }
  n = -1;
  if (sscanf(s, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && n >= 0 && s[n] == '\0') {
    *domain = a, *bus = b, *dev = c, *fn = 0;
    return 1;
  }
  n = -1;
  if (sscanf(s, "%x:%x.%x%n", &a, &b, &c, &n) == 3 && n >= 0 && s[n] == '\0') {
    *domain = 0, *bus = a, *dev = b, *fn = c;
    return 1;
  }
  return 0;
}

static void gpu_defaults(struct gpu* g, unsigned int index) {
  memset(g, 0, sizeof *g);
  snprintf(g->uuid, sizeof g->uuid, "GPU-%08x-0000-0000-0000-000000000000", index);
  snprintf(g->name, sizeof g->name, "NVIDIA H100 80GB HBM3");
  g->bus = 0x10 + index;
  g->minor = index;
  g->pci_id = 0x233010DEu;
  g->pci_subsys = 0x16C110DEu;
  g->ecc = 1;
}

/* Splits a line into words, in place; a word may contain "quoted text" (quotes removed). */
static int split(char* line, char** words, int max) {
  int n = 0;
  char* p = line;
  while (*p != '\0' && n < max) {
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') ++p;
    if (*p == '\0') break;
    char* out = p;
    words[n++] = out;
    int quoted = 0;
    while (*p != '\0' && (quoted || (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n'))) {
      if (*p == '"') quoted = !quoted, ++p;
      else *out++ = *p++;
    }
    if (*p != '\0') ++p;
    *out = '\0';
  }
  return n;
}

static int parse_index(const char* s, unsigned int* out) {
  char* end;
  unsigned long v = strtoul(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v >= MAX_GPUS) return 0;
  *out = (unsigned int)v;
  return 1;
}

static void gpu_key(struct gpu* g, const char* key, const char* value) {
  if (strcmp(key, "uuid") == 0) snprintf(g->uuid, sizeof g->uuid, "%s", value);
  else if (strcmp(key, "name") == 0) snprintf(g->name, sizeof g->name, "%s", value);
  else if (strcmp(key, "bus") == 0) parse_bus(value, &g->domain, &g->bus, &g->dev, &g->fn);
  else if (strcmp(key, "util") == 0) g->util = (unsigned int)num(value);
  else if (strcmp(key, "memutil") == 0) g->memutil = (unsigned int)num(value);
  else if (strcmp(key, "mem_total") == 0) g->mem_total = num(value);
  else if (strcmp(key, "mem_used") == 0) g->mem_used = num(value);
  else if (strcmp(key, "temp") == 0) g->temp = (unsigned int)num(value);
  else if (strcmp(key, "power_mw") == 0) g->power_mw = (unsigned int)num(value);
  else if (strcmp(key, "throttle") == 0) g->throttle = num(value);
  else if (strcmp(key, "ecc") == 0) g->ecc = num(value) != 0;
  else if (strcmp(key, "ecc_corrected") == 0) g->ecc_c = num(value);
  else if (strcmp(key, "ecc_uncorrected") == 0) g->ecc_u = num(value);
  else if (strcmp(key, "ecc_corrected_agg") == 0) g->ecc_c_agg = num(value), g->agg_c_set = 1;
  else if (strcmp(key, "ecc_uncorrected_agg") == 0) g->ecc_u_agg = num(value), g->agg_u_set = 1;
  else if (strcmp(key, "retired_pending") == 0) g->retired_pending = num(value) != 0;
  else if (strcmp(key, "remapped_corrected") == 0) g->remap_c = (unsigned int)num(value);
  else if (strcmp(key, "remapped_uncorrected") == 0) g->remap_u = (unsigned int)num(value);
  else if (strcmp(key, "remapped_pending") == 0) g->remap_pending = num(value) != 0;
  else if (strcmp(key, "remapped_failed") == 0) g->remap_failed = num(value) != 0;
  else if (strcmp(key, "minor") == 0) g->minor = (unsigned int)num(value);
  else if (strcmp(key, "pci_id") == 0) g->pci_id = (unsigned int)num(value);
  else if (strcmp(key, "pci_subsys") == 0) g->pci_subsys = (unsigned int)num(value);
  else if (strcmp(key, "events") == 0) g->events = num(value), g->events_set = 1;
}

/* Parses the control file at `path`; NULL only when out of memory. */
static struct config* parse_file(const char* path) {
  struct config* c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  snprintf(c->driver, sizeof c->driver, "550.54.15");
  for (unsigned int i = 0; i < MAX_GPUS; ++i) gpu_defaults(&c->gpus[i], i);
  FILE* f = path != NULL && *path != '\0' ? fopen(path, "re") : NULL;
  if (f == NULL) return c;
  char line[4096];
  char* w[64];
  while (fgets(line, sizeof line, f) != NULL) {
    int n = split(line, w, 64);
    if (n == 0 || w[0][0] == '#') continue;
    unsigned int idx;
    if (strcmp(w[0], "gpu") == 0 && n >= 2 && parse_index(w[1], &idx)) {
      struct gpu* g = &c->gpus[idx];
      g->present = 1;
      if (idx + 1 > c->count) c->count = idx + 1;
      for (int i = 2; i < n; ++i) {
        char* eq = strchr(w[i], '=');
        if (eq == NULL) continue;
        *eq = '\0';
        gpu_key(g, w[i], eq + 1);
      }
    } else if (strcmp(w[0], "proc") == 0 && n >= 2 && parse_index(w[1], &idx) && c->nprocs < MAX_PROCS) {
      struct proc* p = &c->procs[c->nprocs++];
      p->gpu = idx, p->pid = 0, p->used = 0, p->gi = NO_INSTANCE, p->ci = NO_INSTANCE;
      for (int i = 2; i < n; ++i) {
        char* eq = strchr(w[i], '=');
        if (eq == NULL) continue;
        *eq++ = '\0';
        if (strcmp(w[i], "pid") == 0) p->pid = (unsigned int)num(eq);
        else if (strcmp(w[i], "used") == 0) p->used = strcasecmp(eq, "NA") == 0 ? ~0ULL : num(eq);
        else if (strcmp(w[i], "gi") == 0) p->gi = (unsigned int)num(eq);
        else if (strcmp(w[i], "ci") == 0) p->ci = (unsigned int)num(eq);
      }
    } else if (strcmp(w[0], "error") == 0 && n >= 4 && c->nerrors < MAX_ERRORS) {
      struct error* e = &c->errors[c->nerrors];
      if (strcmp(w[1], "*") == 0) e->gpu = -1;
      else if (parse_index(w[1], &idx)) e->gpu = (int)idx;
      else continue;
      if (!parse_code(w[3], &e->code)) continue;
      snprintf(e->call, sizeof e->call, "%s", w[2]);
      ++c->nerrors;
    } else if (strcmp(w[0], "lost") == 0 && n >= 2 && parse_index(w[1], &idx)) {
      c->gpus[idx].lost = 1;
    } else if (strcmp(w[0], "sleep") == 0 && n >= 3 && c->nsleeps < MAX_SLEEPS) {
      struct sleep_rule* s = &c->sleeps[c->nsleeps++];
      snprintf(s->call, sizeof s->call, "%s", w[1]);
      s->ms = strcmp(w[2], "forever") == 0 ? -1 : (long long)num(w[2]);
    } else if (strcmp(w[0], "xid") == 0 && n >= 3 && parse_index(w[1], &idx) && c->nevents < MAX_EVENTS) {
      c->events[c->nevents++] = (struct event){idx, EVENT_XID, num(w[2])};
    } else if (strcmp(w[0], "event") == 0 && n >= 4 && parse_index(w[1], &idx) && c->nevents < MAX_EVENTS) {
      c->events[c->nevents++] = (struct event){idx, num(w[2]), num(w[3])};
    } else if (strcmp(w[0], "init_error") == 0 && n >= 2) {
      nvmlReturn_t code;
      if (parse_code(w[1], &code)) c->init_error = code;
    } else if (strcmp(w[0], "driver") == 0 && n >= 2) {
      snprintf(c->driver, sizeof c->driver, "%s", w[1]);
    }
  }
  fclose(f);
  for (unsigned int i = 0; i < MAX_GPUS; ++i) {
    struct gpu* g = &c->gpus[i];
    if (!g->agg_c_set) g->ecc_c_agg = g->ecc_c;
    if (!g->agg_u_set) g->ecc_u_agg = g->ecc_u;
    if (!g->events_set) g->events = g->ecc ? 0x1FULL : 0x1FULL & ~EVENT_ECC;
  }
  return c;
}

/* The last parse, shared while the file's identity and times stay the same, so that a call costs a
 * stat(2) rather than a parse (a real driver answers in microseconds; the benchmarks of ddprun's
 * GPU sampling must not measure this file's parser). A new file renamed over the old one, or any
 * change of size or times, is parsed again at the next call. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct config* cached;  /* under cache_lock, holding one of its refs */
static struct stat cached_stat;
static char cached_path[4096];

static int same_file(const struct stat* a, const struct stat* b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Lets go of what load() returned. */
static void release(struct config* c) {
  if (c == NULL) return;
  pthread_mutex_lock(&cache_lock);
  const int last = --c->refs == 0;
  pthread_mutex_unlock(&cache_lock);
  if (last) free(c);
}

/* What stall() read at the start of the exported call this thread is in, for that call's own
 * load(): one look at the file per call, as one call of a driver is one request. stall() lets go of
 * one left by a call that returned before it loaded. */
static __thread struct config* handed_over;

/* The control file's directives, read-only (release() it); NULL only when out of memory. */
static struct config* load(void) {
  if (handed_over != NULL) {
    struct config* c = handed_over;
    handed_over = NULL;
    return c;
  }
  const char* path = getenv("DDPRUN_NVML_STANDIN");
  struct stat now;
  const int known = path != NULL && *path != '\0' && strlen(path) < sizeof cached_path && stat(path, &now) == 0;
  pthread_mutex_lock(&cache_lock);
  if (known && cached != NULL && strcmp(path, cached_path) == 0 && same_file(&now, &cached_stat)) {
    ++cached->refs;
    pthread_mutex_unlock(&cache_lock);
    return cached;
  }
  pthread_mutex_unlock(&cache_lock);
  struct config* c = parse_file(path);
  if (c == NULL) return NULL;
  c->refs = 1;
  if (!known) return c;
  pthread_mutex_lock(&cache_lock);
  struct config* old = cached;
  /* Stamped with the stat taken before the parse: a change during it is seen by the next call. */
  cached = c;
  ++c->refs;
  cached_stat = now;
  snprintf(cached_path, sizeof cached_path, "%s", path);
  pthread_mutex_unlock(&cache_lock);
  release(old);
  return c;
}

/* The code an `error` line gives CALL on GPU gpu (-1: a call without a GPU), or SUCCESS. */
static nvmlReturn_t injected(const struct config* c, const char* call, int gpu) {
  for (unsigned int i = 0; i < c->nerrors; ++i)
    if ((c->errors[i].gpu == -1 || c->errors[i].gpu == gpu) && strcmp(c->errors[i].call, call) == 0)
      return c->errors[i].code;
  return NVML_SUCCESS;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long long ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* A `sleep CALL MS` line: sleep, re-reading the file every 20 ms (a rewrite may release it). */
static void stall(const char* call) {
  release(handed_over);  /* from a call that ended before its load() */
  handed_over = NULL;
  long long start = now_ms();
  for (;;) {
    struct config* c = load();
    if (c == NULL) return;
    long long ms = 0;
    int found = 0;
    for (unsigned int i = 0; i < c->nsleeps; ++i)
      if (strcmp(c->sleeps[i].call, call) == 0) { ms = c->sleeps[i].ms; found = 1; break; }
    if (!found) {
      handed_over = c;  /* what this call goes on with */
      return;
    }
    release(c);
    long long left = ms < 0 ? 20 : start + ms - now_ms();
    if (left <= 0) return;
    nap_ms(left < 20 ? left : 20);
  }
}

/* ---- library state ---- */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int refcount; /* under lock */
static struct nvmlDevice_st devices[MAX_GPUS];

struct nvmlEventSet_st {
  int in_use;
  unsigned long long mask[MAX_GPUS]; /* registered event types per GPU */
  unsigned int seen[MAX_GPUS];       /* events of that GPU in the file already consumed */
};
static struct nvmlEventSet_st sets[MAX_SETS]; /* under lock */

static int initialised(void) {
  pthread_mutex_lock(&lock);
  int yes = refcount > 0;
  pthread_mutex_unlock(&lock);
  return yes;
}

static nvmlDevice_t handle_of(unsigned int index) {
  return (nvmlDevice_t){&devices[index]}; /* a handle is its slot: no state to race on */
}

/* The index of a handle this library gave out, or -1. */
static int index_of(nvmlDevice_t device) {
  if (device.handle < &devices[0] || device.handle >= &devices[MAX_GPUS]) return -1;
  return (int)(device.handle - &devices[0]);
}

/* The start of every device call: stall, then UNINITIALIZED, INVALID_ARGUMENT (bad handle, or
 * args_ok false), GPU_IS_LOST, an injected error. On SUCCESS *out is the config (free it). */
static nvmlReturn_t begin(const char* call, nvmlDevice_t device, int args_ok, struct config** out, struct gpu** g) {
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  int i = index_of(device);
  nvmlReturn_t rc = NVML_SUCCESS;
  if (i < 0 || (unsigned int)i >= c->count || !args_ok) rc = NVML_ERROR_INVALID_ARGUMENT;
  else if (c->gpus[i].lost) rc = NVML_ERROR_GPU_IS_LOST;
  else rc = injected(c, call, i);
  if (rc != NVML_SUCCESS) { release(c); return rc; }
  *out = c;
  *g = &c->gpus[i];
  return NVML_SUCCESS;
}

/* The start of a call without a device. */
static nvmlReturn_t begin_global(const char* call, int args_ok, struct config** out) {
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!args_ok) return NVML_ERROR_INVALID_ARGUMENT;
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  nvmlReturn_t rc = injected(c, call, -1);
  if (rc != NVML_SUCCESS) { release(c); return rc; }
  *out = c;
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char* s, char* buf, unsigned int length) {
  size_t n = strlen(s);
  if ((size_t)length < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, n + 1);
  return NVML_SUCCESS;
}

/* Returns rc (evaluated first: it may read c) after freeing the config c. */
#define DONE(rc) do { nvmlReturn_t done_rc_ = (rc); release(c); return done_rc_; } while (0)

/* ---- init, shutdown, errors, system ---- */
static nvmlReturn_t init(const char* call) {
  stall(call);
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  nvmlReturn_t rc = c->init_error != NVML_SUCCESS ? c->init_error : injected(c, call, -1);
  release(c);
  if (rc != NVML_SUCCESS) return rc;
  pthread_mutex_lock(&lock);
  ++refcount;
  pthread_mutex_unlock(&lock);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return init("nvmlInit_v2"); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return init("nvmlInitWithFlags"); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
  stall("nvmlShutdown");
  pthread_mutex_lock(&lock);
  nvmlReturn_t rc = NVML_ERROR_UNINITIALIZED;
  if (refcount > 0) --refcount, rc = NVML_SUCCESS;
  pthread_mutex_unlock(&lock);
  return rc;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; ++i)
    if (codes[i].code == result && codes[i].text != NULL) return codes[i].text;
  return "Unknown Error";
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  struct config* c;
  nvmlReturn_t rc = begin_global("nvmlSystemGetDriverVersion", version != NULL, &c);
  if (rc != NVML_SUCCESS) return rc;
  DONE(copy_string(c->driver, version, length));
}

/* ---- enumeration ---- */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  struct config* c;
  nvmlReturn_t rc = begin_global("nvmlDeviceGetCount_v2", deviceCount != NULL, &c);
  if (rc != NVML_SUCCESS) return rc;
  *deviceCount = c->count;
  DONE(NVML_SUCCESS);
}

/* A handle lookup that found GPU i: lost, injected error, or the handle. */
static nvmlReturn_t found(struct config* c, const char* call, unsigned int i, nvmlDevice_t* device) {
  nvmlReturn_t rc = c->gpus[i].lost ? NVML_ERROR_GPU_IS_LOST : injected(c, call, (int)i);
  if (rc == NVML_SUCCESS) *device = handle_of(i);
  return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  static const char call[] = "nvmlDeviceGetHandleByIndex_v2";
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  if (device == NULL || index >= c->count) DONE(NVML_ERROR_INVALID_ARGUMENT);
  DONE(found(c, call, index, device));
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  static const char call[] = "nvmlDeviceGetHandleByUUID";
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (uuid == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  /* NVML "may initialize additional GPUs as it searches": a lost GPU met on the way fails it. */
  for (unsigned int i = 0; i < c->count; ++i) {
    if (c->gpus[i].lost) DONE(NVML_ERROR_GPU_IS_LOST);
    if (strcmp(c->gpus[i].uuid, uuid) == 0) DONE(found(c, call, i, device));
  }
  nvmlReturn_t rc = injected(c, call, -1);
  DONE(rc != NVML_SUCCESS ? rc : NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  static const char call[] = "nvmlDeviceGetHandleByPciBusId_v2";
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  unsigned int domain, bus, dev, fn;
  if (pciBusId == NULL || device == NULL || !parse_bus(pciBusId, &domain, &bus, &dev, &fn))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct config* c = load();
  if (c == NULL) return NVML_ERROR_MEMORY;
  for (unsigned int i = 0; i < c->count; ++i) {
    const struct gpu* g = &c->gpus[i];
    if (g->domain == domain && g->bus == bus && g->dev == dev && g->fn == fn) DONE(found(c, call, i, device));
  }
  nvmlReturn_t rc = injected(c, call, -1);
  DONE(rc != NVML_SUCCESS ? rc : NVML_ERROR_NOT_FOUND);
}

/* ---- identity ---- */
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetIndex", device, index != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *index = (unsigned int)index_of(device);
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetUUID", device, uuid != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  DONE(copy_string(g->uuid, uuid, length));
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetName", device, name != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  DONE(copy_string(g->name, name, length));
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetPciInfo_v3", device, pci != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", g->domain & 0xFFFFu, g->bus & 0xFFu,
           g->dev & 0xFFu, g->fn & 0xFu);
  snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", g->domain, g->bus & 0xFFu, g->dev & 0xFFu, g->fn & 0xFu);
  pci->domain = g->domain, pci->bus = g->bus, pci->device = g->dev;
  pci->pciDeviceId = g->pci_id, pci->pciSubSystemId = g->pci_subsys;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetMinorNumber", device, minorNumber != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *minorNumber = g->minor;
  DONE(NVML_SUCCESS);
}

/* ---- state ---- */
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetUtilizationRates", device, utilization != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  utilization->gpu = g->util, utilization->memory = g->memutil;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetMemoryInfo", device, memory != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  memory->total = g->mem_total, memory->used = g->mem_used;
  memory->free = g->mem_total > g->mem_used ? g->mem_total - g->mem_used : 0;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                            nvmlProcessInfo_t* infos) {
  struct config* c;
  struct gpu* g;
  /* infos may be NULL only to ask for the count (*infoCount == 0). */
  int args_ok = infoCount != NULL && (infos != NULL || *infoCount == 0);
  nvmlReturn_t rc = begin("nvmlDeviceGetComputeRunningProcesses_v3", device, args_ok, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  unsigned int gpu = (unsigned int)index_of(device), needed = 0;
  for (unsigned int i = 0; i < c->nprocs; ++i) needed += c->procs[i].gpu == gpu;
  if (*infoCount < needed) {
    *infoCount = needed; /* infos untouched */
    DONE(NVML_ERROR_INSUFFICIENT_SIZE);
  }
  unsigned int n = 0;
  for (unsigned int i = 0; i < c->nprocs; ++i) {
    const struct proc* p = &c->procs[i];
    if (p->gpu != gpu) continue;
    infos[n++] = (nvmlProcessInfo_t){p->pid, p->used, p->gi, p->ci};
  }
  *infoCount = n;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int* temp) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetTemperature", device, temp != NULL && sensorType == 0, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *temp = g->temp;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetPowerUsage", device, power != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *power = g->power_mw;
  DONE(NVML_SUCCESS);
}

static nvmlReturn_t clock_reasons(const char* call, nvmlDevice_t device, unsigned long long* reasons) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin(call, device, reasons != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *reasons = g->throttle;
  DONE(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", device, reasons);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", device, reasons);
}

/* ---- health ---- */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long* eccCounts) {
  struct config* c;
  struct gpu* g;
  int args_ok = eccCounts != NULL && (errorType == 0 || errorType == 1) && (counterType == 0 || counterType == 1);
  nvmlReturn_t rc = begin("nvmlDeviceGetTotalEccErrors", device, args_ok, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (!g->ecc) DONE(NVML_ERROR_NOT_SUPPORTED);
  if (errorType == 1) *eccCounts = counterType == 0 ? g->ecc_u : g->ecc_u_agg;
  else *eccCounts = counterType == 0 ? g->ecc_c : g->ecc_c_agg;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* isPending) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetRetiredPagesPendingStatus", device, isPending != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (!g->ecc) DONE(NVML_ERROR_NOT_SUPPORTED);
  *isPending = g->retired_pending ? 1 : 0;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows, unsigned int* uncRows,
                                              unsigned int* isPending, unsigned int* failureOccurred) {
  struct config* c;
  struct gpu* g;
  int args_ok = corrRows != NULL && uncRows != NULL && isPending != NULL && failureOccurred != NULL;
  nvmlReturn_t rc = begin("nvmlDeviceGetRemappedRows", device, args_ok, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  if (!g->ecc) DONE(NVML_ERROR_NOT_SUPPORTED);
  *corrRows = g->remap_c, *uncRows = g->remap_u, *isPending = g->remap_pending, *failureOccurred = g->remap_failed;
  DONE(NVML_SUCCESS);
}

/* ---- events ---- */
static int set_index(nvmlEventSet_t set) { /* under lock; -1 if not a live set */
  if (set.handle < &sets[0] || set.handle >= &sets[MAX_SETS] || !set.handle->in_use) return -1;
  return (int)(set.handle - &sets[0]);
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  struct config* c;
  nvmlReturn_t rc = begin_global("nvmlEventSetCreate", set != NULL, &c);
  if (rc != NVML_SUCCESS) return rc;
  rc = NVML_ERROR_MEMORY;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_SETS; ++i)
    if (!sets[i].in_use) {
      memset(&sets[i], 0, sizeof sets[i]);
      sets[i].in_use = 1;
      set->handle = &sets[i];
      rc = NVML_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  DONE(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) {
  struct config* c;
  struct gpu* g;
  nvmlReturn_t rc = begin("nvmlDeviceGetSupportedEventTypes", device, eventTypes != NULL, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  *eventTypes = g->events;
  DONE(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
  struct config* c;
  struct gpu* g;
  pthread_mutex_lock(&lock);
  int s = set_index(set);
  pthread_mutex_unlock(&lock);
  nvmlReturn_t rc = begin("nvmlDeviceRegisterEvents", device, s >= 0, &c, &g);
  if (rc != NVML_SUCCESS) return rc;
  /* "NOT_SUPPORTED if ... some of requested event types [are not supported]": none registered. */
  if ((eventTypes & ~g->events) != 0) DONE(NVML_ERROR_NOT_SUPPORTED);
  unsigned int gpu = (unsigned int)index_of(device), present = 0;
  for (unsigned int i = 0; i < c->nevents; ++i) present += c->events[i].gpu == gpu;
  pthread_mutex_lock(&lock);
  if (sets[s].in_use) {
    if (sets[s].mask[gpu] == 0) sets[s].seen[gpu] = present; /* earlier events are not recorded */
    sets[s].mask[gpu] |= eventTypes;
  }
  pthread_mutex_unlock(&lock);
  DONE(NVML_SUCCESS);
}

/* The next event for set s in c, consuming it; 1 if one was found. Under lock. */
static int next_event(int s, const struct config* c, nvmlEventData_t* data) {
  unsigned int ordinal[MAX_GPUS] = {0};
  for (unsigned int i = 0; i < c->nevents; ++i) {
    const struct event* e = &c->events[i];
    unsigned int k = ordinal[e->gpu]++;
    if (sets[s].mask[e->gpu] == 0 || k < sets[s].seen[e->gpu]) continue;
    sets[s].seen[e->gpu] = k + 1;
    if ((e->type & sets[s].mask[e->gpu]) == 0) continue; /* a type not registered: never recorded */
    data->device = handle_of(e->gpu);
    data->eventType = e->type;
    data->eventData = e->data;
    data->gpuInstanceId = NO_INSTANCE, data->computeInstanceId = NO_INSTANCE;
    return 1;
  }
  return 0;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) {
  static const char call[] = "nvmlEventSetWait_v2";
  stall(call);
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  long long deadline = now_ms() + timeoutms;
  for (;;) {
    struct config* c = load();
    if (c == NULL) return NVML_ERROR_MEMORY;
    nvmlReturn_t rc = NVML_ERROR_TIMEOUT;
    pthread_mutex_lock(&lock);
    int s = set_index(set);
    if (s < 0 || data == NULL) rc = NVML_ERROR_INVALID_ARGUMENT;
    else {
      for (unsigned int i = 0; i < c->count && rc == NVML_ERROR_TIMEOUT; ++i)
        if (sets[s].mask[i] != 0 && c->gpus[i].lost) rc = NVML_ERROR_GPU_IS_LOST; /* "if a GPU has fallen off" */
      if (rc == NVML_ERROR_TIMEOUT) rc = injected(c, call, -1);
      if (rc == NVML_SUCCESS) rc = next_event(s, c, data) ? NVML_SUCCESS : NVML_ERROR_TIMEOUT;
    }
    pthread_mutex_unlock(&lock);
    release(c);
    long long left = deadline - now_ms();
    if (rc != NVML_ERROR_TIMEOUT || left <= 0) return rc;
    nap_ms(left < 10 ? left : 10);
  }
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  struct config* c;
  nvmlReturn_t rc = begin_global("nvmlEventSetFree", 1, &c);
  if (rc != NVML_SUCCESS) return rc;
  pthread_mutex_lock(&lock);
  int s = set_index(set);
  if (s >= 0) sets[s].in_use = 0;
  pthread_mutex_unlock(&lock);
  DONE(s >= 0 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT);
}
