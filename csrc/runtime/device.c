/* Runtime initialisation: the HAL, its devices, error reporting.
 *
 * A device is a logical NeuronCore as the HAL reports it (the software
 * core's model: host_model.c). The environment read here:
 *   TORCH_NEURONX_HAL        a HAL shared library to load instead of the
 *                            software NeuronCore (exports TNRT_HAL_ENTRY)
 *   NEURON_LAUNCH_BLOCKING   1: every launch waits for its task
 *   TORCH_NEURONX_SHARED_DEVICE_MEMORY  1/0: device memory other ranks of
 *                            the host can map, from the start (default: on
 *                            when LOCAL_WORLD_SIZE > 1, as torchrun sets it)
 * (the device model's variables are read in host_model.c, the protect
 * mode's in hal_host.c, the thread pool's in pool.c) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hal_support.h"
#include "internal.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

tnrt_runtime_t g_rt;

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
static tnrt_status_t g_init_status = TNRT_ERR_INTERNAL;
static char g_init_error[256];
static atomic_int g_initialized;
static atomic_int g_bad_fork;

static _Thread_local char t_error[512];

const char *tnrt_status_to_string(tnrt_status_t s) {
  switch (s) {
    case TNRT_OK: return "success";
    case TNRT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TNRT_ERR_INVALID_DEVICE: return "invalid device";
    case TNRT_ERR_OUT_OF_MEMORY: return "out of memory";
    case TNRT_ERR_FORKED: return "used in forked child";
    case TNRT_ERR_CONFIG: return "bad configuration";
    case TNRT_ERR_NOT_READY: return "not ready";
    case TNRT_ERR_INTERNAL: return "internal error";
    case TNRT_ERR_DEVICE_INDEX: return "device-side index out of range";
    case TNRT_ERR_DEVICE_ASSERT: return "device-side assertion";
    case TNRT_ERR_NOT_SUPPORTED: return "not supported by the HAL";
  }
  return "unknown status";
}

const char *tnrt_last_error(void) { return t_error; }

tnrt_status_t tnrt_set_error(tnrt_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_error, sizeof t_error, fmt, ap);
  va_end(ap);
  return status;
}

/* The runtime's clock: events, traces, and the HAL through k_support. */
int64_t tnrt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int trace_enabled(void) {
  return atomic_load_explicit(&g_trace_enabled, memory_order_relaxed);
}

/* What a HAL may call of the runtime (hal_support.h). */
static const tnrt_hal_support_t k_support = {
    .version = TNRT_HAL_SUPPORT_VERSION,
    .set_error = tnrt_set_error,
    .now_ns = tnrt_now_ns,
    .trace_enabled = trace_enabled,
    .trace_task = tnrt_trace_push,
    .pin_queue_worker = tnrt_pin_queue_worker,
};

/* The HAL: the software NeuronCore unless TORCH_NEURONX_HAL names a driver
 * library; its table must speak this runtime's API version. */
static tnrt_status_t select_hal(const tnrt_hal_t **out) {
  const char *path = getenv("TORCH_NEURONX_HAL");
  tnrt_hal_host_support(&k_support);
  const tnrt_hal_t *hal = tnrt_hal_host();
  if (path && *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return tnrt_set_error(TNRT_ERR_CONFIG, "TORCH_NEURONX_HAL=%s cannot be loaded: %s", path,
                            dlerror());
    tnrt_hal_support_fn support = (tnrt_hal_support_fn)dlsym(lib, TNRT_HAL_SUPPORT_ENTRY);
    if (support) support(&k_support);
    tnrt_hal_entry_fn entry = (tnrt_hal_entry_fn)dlsym(lib, TNRT_HAL_ENTRY);
    hal = entry ? entry() : NULL;
    if (!hal)
      return tnrt_set_error(TNRT_ERR_CONFIG, "TORCH_NEURONX_HAL=%s exports no %s table", path,
                            TNRT_HAL_ENTRY);
  }
  if (hal->api_version != TNRT_HAL_API_VERSION)
    return tnrt_set_error(TNRT_ERR_CONFIG,
                          "the %s HAL speaks API version %u; this "
                          "runtime needs version %u",
                          hal->name ? hal->name : "unnamed", hal->api_version,
                          TNRT_HAL_API_VERSION);
  if (!hal->device_count || !hal->get_properties || !hal->mem_alloc || !hal->mem_free ||
      !hal->host_addressable || !hal->memcpy_h2d || !hal->memcpy_d2h || !hal->memcpy_d2d ||
      !hal->memset_d || !hal->queue_create || !hal->queue_submit || !hal->queue_completed ||
      !hal->queue_submitted || !hal->queue_wait)
    return tnrt_set_error(TNRT_ERR_CONFIG, "the %s HAL leaves a required entry empty",
                          hal->name ? hal->name : "unnamed");
  *out = hal;
  return TNRT_OK;
}

tnrt_status_t tnrt_configure_devices(tnrt_runtime_t *rt) {
  tnrt_status_t st = select_hal(&rt->hal);
  if (st != TNRT_OK) return st;
  const tnrt_hal_t *hal = rt->hal;
  int n = 0;
  st = hal->device_count(hal->context, &n);
  if (st != TNRT_OK) return st;
  if (n < 0 || n > TNRT_MAX_DEVICES)
    return tnrt_set_error(TNRT_ERR_CONFIG, "the %s HAL reports %d devices (at most %d)", hal->name,
                          n, TNRT_MAX_DEVICES);
  for (int d = 0; d < n; d++) {
    st = hal->get_properties(hal->context, d, &rt->props[d]);
    if (st != TNRT_OK) return st;
    rt->capacity[d] = rt->props[d].total_memory;
  }
  rt->device_count = n;
  rt->host_budget = hal->memory_budget ? hal->memory_budget(hal->context) : UINT64_MAX;
  const char *lb = getenv("NEURON_LAUNCH_BLOCKING");
  rt->launch_blocking = lb && *lb && strcmp(lb, "0") != 0;
  /* device memory other ranks of the host read in place (the collectives'
   * direct path): from the start in a process torchrun started with
   * several ranks on this host, so parameters and buffers allocated before
   * init_process_group qualify too */
  const char *sh = getenv("TORCH_NEURONX_SHARED_DEVICE_MEMORY");
  const char *lws = getenv("LOCAL_WORLD_SIZE");
  tnrt_set_shared_segments(sh && *sh ? strcmp(sh, "0") != 0 : lws && atoi(lws) > 1);
  return TNRT_OK;
}

static void on_fork_child(void) {
  if (atomic_load(&g_initialized)) atomic_store(&g_bad_fork, 1);
}

static void do_init(void) {
  tnrt_runtime_t *rt = &g_rt;
  tnrt_status_t st = tnrt_configure_devices(rt);
  if (st != TNRT_OK) {
    snprintf(g_init_error, sizeof g_init_error, "%s", tnrt_last_error());
    rt->device_count = 0;
    g_init_status = st;
    return;
  }
  int n = rt->device_count;
  rt->streams = calloc((size_t)(n ? n : 1) * TNRT_STREAMS_PER_DEVICE, sizeof(tnrt_stream_t));
  if (!rt->streams) {
    snprintf(g_init_error, sizeof g_init_error, "out of host memory");
    g_init_status = TNRT_ERR_OUT_OF_MEMORY;
    rt->device_count = 0;
    return;
  }
  for (int d = 0; d < n; d++)
    for (int i = 0; i < TNRT_STREAMS_PER_DEVICE; i++) {
      tnrt_stream_t *s = &rt->streams[d * TNRT_STREAMS_PER_DEVICE + i];
      s->device = d;
      s->index = i;
      s->once = (pthread_once_t)PTHREAD_ONCE_INIT;
    }
  tnrt_allocator_init(n);
  pthread_atfork(NULL, NULL, on_fork_child);
  g_init_status = TNRT_OK;
  atomic_store(&g_initialized, 1);
}

tnrt_status_t tnrt_init(void) {
  /* every op asks (through the device checks): answer without pthread_once */
  if (atomic_load_explicit(&g_initialized, memory_order_acquire) &&
      !atomic_load_explicit(&g_bad_fork, memory_order_relaxed))
    return TNRT_OK;
  if (atomic_load(&g_bad_fork))
    return tnrt_set_error(TNRT_ERR_FORKED,
                          "the neuron runtime cannot be re-initialised in a "
                          "forked subprocess");
  pthread_once(&g_init_once, do_init);
  if (g_init_status != TNRT_OK) return tnrt_set_error(g_init_status, "%s", g_init_error);
  return TNRT_OK;
}

int tnrt_is_initialized(void) { return atomic_load(&g_initialized); }
int tnrt_in_bad_fork(void) { return atomic_load(&g_bad_fork); }

int tnrt_device_count(void) {
  if (atomic_load(&g_bad_fork)) return g_rt.device_count;
  if (tnrt_init() != TNRT_OK) return 0;
  return g_rt.device_count;
}

tnrt_status_t tnrt_check_device(int device) {
  tnrt_status_t st = tnrt_init();
  if (st != TNRT_OK) return st;
  if (device < 0 || device >= g_rt.device_count)
    return tnrt_set_error(TNRT_ERR_INVALID_DEVICE,
                          "device index %d is out of range: %d neuron "
                          "device(s) are visible",
                          device, g_rt.device_count);
  return TNRT_OK;
}

tnrt_status_t tnrt_device_properties(int device, tnrt_device_props_t *out) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  *out = g_rt.props[device];
  return TNRT_OK;
}

int tnrt_launch_blocking(void) { return g_rt.launch_blocking; }

const char *tnrt_hal_name(void) { return tnrt_init() == TNRT_OK ? g_rt.hal->name : "none"; }

int tnrt_host_addressable(void) {
  return tnrt_init() == TNRT_OK && g_rt.hal->host_addressable(g_rt.hal->context);
}

tnrt_status_t tnrt_memcpy_d2h(int device, void *dst, const void *src, size_t bytes) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK || !bytes) return st;
  return g_rt.hal->memcpy_d2h(g_rt.hal->context, device, dst, src, bytes);
}

static tnrt_status_t shared_supported(int device) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK) return st;
  if (!g_rt.hal->mem_alloc_shared || !g_rt.hal->mem_import || !g_rt.hal->mem_unimport)
    return tnrt_set_error(TNRT_ERR_NOT_SUPPORTED,
                          "the %s HAL cannot share device memory with other processes",
                          g_rt.hal->name);
  return TNRT_OK;
}

tnrt_status_t tnrt_mem_alloc_shared(int device, size_t bytes, void **ptr,
                                    tnrt_mem_handle_t *handle) {
  tnrt_status_t st = shared_supported(device);
  if (st != TNRT_OK) return st;
  if (!bytes || !ptr || !handle)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "shared allocation of %zu bytes", bytes);
  return g_rt.hal->mem_alloc_shared(g_rt.hal->context, device, bytes, ptr, handle);
}

void tnrt_mem_free_shared(int device, void *ptr, size_t bytes) {
  if (ptr && tnrt_check_device(device) == TNRT_OK)
    g_rt.hal->mem_free(g_rt.hal->context, device, ptr, bytes);
}

tnrt_status_t tnrt_mem_import(int device, const tnrt_mem_handle_t *handle, void **ptr,
                              size_t *bytes) {
  tnrt_status_t st = shared_supported(device);
  if (st != TNRT_OK) return st;
  if (!handle || !ptr || !bytes)
    return tnrt_set_error(TNRT_ERR_INVALID_ARGUMENT, "import of a NULL handle");
  return g_rt.hal->mem_import(g_rt.hal->context, device, handle, ptr, bytes);
}

void tnrt_mem_unimport(int device, void *ptr, size_t bytes) {
  if (ptr && shared_supported(device) == TNRT_OK)
    g_rt.hal->mem_unimport(g_rt.hal->context, device, ptr, bytes);
}

tnrt_status_t tnrt_memcpy_h2d(int device, void *dst, const void *src, size_t bytes) {
  tnrt_status_t st = tnrt_check_device(device);
  if (st != TNRT_OK || !bytes) return st;
  return g_rt.hal->memcpy_h2d(g_rt.hal->context, device, dst, src, bytes);
}
