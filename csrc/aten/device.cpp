// Devices and streams as PyTorch sees them: runtime errors as PyTorch
// exceptions, lazy initialisation, the current device and stream of each
// thread, kernel launch on the current stream, and the device trace.
#include "runtime.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace torch_neuronx {

// ---------------------------------------------------------------- errors

[[noreturn]] void throw_status(tnrt_status_t status, const char *what) {
  std::string detail = tnrt_last_error();
  switch (status) {
    case TNRT_ERR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron out of memory. ", detail);
    case TNRT_ERR_FORKED:
      TORCH_CHECK(false,
                  "Cannot re-initialize neuron in forked subprocess. To use "
                  "neuron with multiprocessing, you must use the 'spawn' start "
                  "method (multiprocessing.set_start_method('spawn')).");
    case TNRT_ERR_INVALID_DEVICE:
      TORCH_CHECK(false, "neuron error: invalid device ordinal: ", detail);
    case TNRT_ERR_CONFIG: TORCH_CHECK(false, "neuron runtime configuration error: ", detail);
    case TNRT_ERR_DEVICE_INDEX: TORCH_CHECK_INDEX(false, detail);
    case TNRT_ERR_DEVICE_ASSERT: TORCH_CHECK(false, detail);
    default: TORCH_CHECK(false, what, ": ", tnrt_status_to_string(status), ". ", detail);
  }
}

void lazy_init() {
  static std::atomic<bool> ok{false};
  if (ok.load(std::memory_order_acquire) && !tnrt_in_bad_fork()) return;
  tnrt_status_t st = tnrt_init();
  if (st != TNRT_OK) throw_status(st, "neuron runtime initialisation");
  ok.store(true, std::memory_order_release);
}

void check_device_index(c10::DeviceIndex index) {
  lazy_init();
  int n = tnrt_device_count();
  TORCH_CHECK(index >= 0 && index < n, "neuron error: invalid device ordinal: device index ",
              static_cast<int>(index), " is out of range; ", n,
              " neuron device(s) are visible (set NEURON_RT_VISIBLE_CORES to "
              "choose them)");
}

// ------------------------------------------------------ devices, streams

// A new thread's current device: neuron:LOCAL_RANK (modulo the visible
// devices) in a process torchrun started, as AWS's runtime maps ranks to
// logical cores, else neuron:0.
static c10::DeviceIndex initial_device() {
  static const c10::DeviceIndex d = [] {
    const char *v = std::getenv("LOCAL_RANK");
    char *end = nullptr;
    long r = v && *v ? std::strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || r <= 0) return c10::DeviceIndex(0);
    int n = tnrt_device_count();
    return c10::DeviceIndex(n > 0 ? r % n : 0);
  }();
  return d;
}
// -1 until the thread first asks: a thread_local with a constant initialiser
// is read without a call to its initialisation wrapper on every access.
static thread_local c10::DeviceIndex t_device = -1;
static thread_local std::array<int8_t, 128> t_stream{};  // index per device
// t_stream's runtime streams, filled on first use (set_current_stream clears)
static thread_local std::array<tnrt_stream_t *, 128> t_native{};

c10::DeviceIndex current_device() {
  c10::DeviceIndex d = t_device;
  return d >= 0 ? d : (t_device = initial_device());
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_device = index;
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), t_stream[device]);
}

void set_current_stream(const c10::Stream &stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got a stream of ",
              stream.device());
  check_device_index(stream.device_index());
  t_stream[stream.device_index()] = static_cast<int8_t>(stream.id());
  t_native[stream.device_index()] = nullptr;
}

tnrt_stream_t *current_native_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  tnrt_stream_t *s = t_native[device];
  if (s) return s;
  s = native_stream(current_stream(device));  // validates device
  t_native[device] = s;
  return s;
}

tnrt_stream_t *native_stream(const c10::Stream &stream) {
  lazy_init();
  tnrt_stream_t *s = tnrt_stream_get(stream.device_index(), static_cast<int>(stream.id()));
  TORCH_CHECK(s, "invalid neuron stream ", stream.id(), " on device ", stream.device());
  return s;
}

namespace {
std::atomic<int64_t> g_small_kernel_elems{2048};
}

int64_t small_kernel_elems() { return g_small_kernel_elems.load(std::memory_order_relaxed); }

int64_t set_small_kernel_elems(int64_t n) { return g_small_kernel_elems.exchange(n); }

namespace {

// set once by choose_provider; read without a lock by every launch
std::atomic<const tnrt_kernel_provider_t *> g_provider{nullptr};
std::string g_provider_error;
std::once_flag g_provider_once;

void choose_provider() {
  const char *env = std::getenv("TORCH_NEURONX_KERNEL_PROVIDER");
  const char *name = env && *env ? env : "host";
  const tnrt_kernel_provider_t *p = tnk_provider_named(name);
  if (!p) {
    g_provider_error = std::string("TORCH_NEURONX_KERNEL_PROVIDER='") + name +
                       "' names no kernel provider; this build has 'host' (the kernel library on "
                       "the host cores), 'counting' (host, counting launches per kernel) and "
                       "'kernels-only' (host, running no host code)";
    return;
  }
  if (tnrt_set_kernel_provider(p) != TNRT_OK) {
    g_provider_error = std::string("kernel provider '") + name + "': " + tnrt_last_error();
    return;
  }
  g_provider.store(p, std::memory_order_release);
}

// Queues on s what submit() queues, with the profiler's link when it records.
template <class Submit>
void launch_with_profiler(tnrt_stream_t *s, const char *name, Submit submit) {
  if (!profiler_recording()) {
    check(submit(static_cast<uint64_t *>(nullptr)), "neuron kernel launch");
    return;
  }
  int64_t t0 = tnrt_now_ns();
  uint64_t seq = 0;
  check(submit(&seq), "neuron kernel launch");
  profiler_note_launch(s, seq, t0, tnrt_now_ns(), name);
}

}  // namespace

const tnrt_kernel_provider_t *kernel_provider() {
  // every launch asks: the chosen provider is one atomic load (std::call_once
  // costs two thread-local lookups a call in libstdc++)
  if (const tnrt_kernel_provider_t *p = g_provider.load(std::memory_order_acquire)) return p;
  std::call_once(g_provider_once, choose_provider);
  const tnrt_kernel_provider_t *p = g_provider.load(std::memory_order_acquire);
  TORCH_CHECK(p, g_provider_error);
  return p;
}

bool kernel_supported(tnk_kernel_t kernel, const tnrt_kernel_query_t &q) {
  const tnrt_kernel_provider_t *p = kernel_provider();
  return kernel >= 0 && kernel < p->kernel_count && p->supports(p->ctx, kernel, &q) != 0;
}

void launch_kernel_id(c10::DeviceIndex device, tnk_kernel_t kernel, const void *args, size_t size,
                      const char *name, int64_t elems) {
  kernel_provider();  // chosen (or its error raised) before the first launch
  tnrt_stream_t *s = current_native_stream(device);
  // A kernel over a few elements takes less time than handing it to the
  // stream's worker on another core; on an idle stream it runs in place.
  int small = elems >= 0 && elems <= small_kernel_elems();
  launch_with_profiler(s, name, [&](uint64_t *seq) {
    return tnrt_launch_kernel(s, kernel, args, size, name, small, seq);
  });
}

void require_host_code(const char *what) {
  const tnrt_kernel_provider_t *p = kernel_provider();
  TORCH_CHECK(p->runs_host_code, what, ": host code cannot run on this device: its kernel ",
              "provider '", p->name, "' runs only its own kernels");
}

void launch_host_code(c10::DeviceIndex device, tnrt_task_fn fn, const void *args, size_t size,
                      const char *name, int64_t elems) {
  require_host_code(name);
  tnrt_stream_t *s = current_native_stream(device);
  bool small = elems >= 0 && elems <= small_kernel_elems();
  launch_with_profiler(s, name, [&](uint64_t *seq) {
    if (small) return tnrt_launch_small(s, fn, args, size, name, seq);
    return seq ? tnrt_launch_seq(s, fn, args, size, name, seq)
               : tnrt_launch(s, fn, args, size, name);
  });
}

void set_current_device_unchecked(c10::DeviceIndex index) noexcept {
  if (index >= 0 && index < tnrt_device_count()) t_device = index;
}

int current_stream_index(int device) noexcept { return static_cast<int>(t_stream[device]); }

void trace_start() { tnrt_trace_start(); }

std::vector<tnrt_trace_record_t> trace_stop() {
  std::vector<tnrt_trace_record_t> out(65536);
  out.resize(tnrt_trace_stop(out.data(), out.size()));
  return out;
}

}  // namespace torch_neuronx
