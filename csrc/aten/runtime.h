// The glue's view of the runtime, for the integration points that need no
// ATen operators (device.cpp, allocator.cpp, host_allocator.cpp,
// generator.cpp, guard.cpp, hooks.cpp): c10 headers only, so those
// translation units stay cheap to compile. neuron.h includes it.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

extern "C" {
#include "../kernels/kernel_list.h"
#include "../kernels/tnk.h"
#include "../runtime/provider.h"
#include "../runtime/tnrt.h"
}

namespace torch_neuronx {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Initialises the runtime on first use; throws the PyTorch exception that
// matches a runtime failure (forked child, bad configuration).
void lazy_init();
// Raises the PyTorch exception for a failed runtime call.
[[noreturn]] void throw_status(tnrt_status_t status, const char *what);
inline void check(tnrt_status_t status, const char *what) {
  if (status != TNRT_OK) throw_status(status, what);
}
// Validates a device index, with the message a user can act on.
void check_device_index(c10::DeviceIndex index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// The guard's uncheckedSetDevice: sets the current device when index names
// a visible device, else leaves it; never throws.
void set_current_device_unchecked(c10::DeviceIndex index) noexcept;

// Streams: c10::Stream ids are runtime stream indices (0 = default).
c10::Stream current_stream(c10::DeviceIndex device);
void set_current_stream(const c10::Stream &stream);
tnrt_stream_t *native_stream(const c10::Stream &stream);
// The runtime stream of current_stream(device) (-1: the current device),
// cached per thread: every launch asks for it.
tnrt_stream_t *current_native_stream(c10::DeviceIndex device);
// The current stream's index on device, read without validation or
// initialisation (the allocator's free path).
int current_stream_index(int device) noexcept;

c10::DeviceAllocator *device_allocator();
// A new neuron tensor on dev (its index, or the current device), made as
// empty.memory_format makes it but without the dispatcher's round trip (CPU
// kernels call empty_cpu the same way): the launchers' outputs.
at::Tensor empty_neuron(at::IntArrayRef size, c10::ScalarType dtype, c10::Device dev,
                        std::optional<c10::MemoryFormat> mf = std::nullopt);
c10::Allocator *host_allocator();
// Registers hooks, guard and allocator with PyTorch (called once at import).
void register_runtime();

// Queues fn(args) on the device's current stream. elems: the elements the
// kernel touches when it is an element-wise kernel (-1: unknown); at most
// small_kernel_elems() (2048 by default) and the stream idle, it runs at
// once on this thread.
int64_t small_kernel_elems();
int64_t set_small_kernel_elems(int64_t n);  // returns the old value (benchmarks)
// Kernels are launched by id with their descriptor (kernels/kernel_list.h)
// and run by the kernel provider in use (runtime/provider.h; chosen once,
// TORCH_NEURONX_KERNEL_PROVIDER=host|counting, default host):
//   launch_kernel<TNK_K_UNARY>(device, args, "aten::abs", out.numel());
// The descriptor's type is checked against the kernel's at compile time.
template <tnk_kernel_t K>
struct KernelArgs;
#define TNX_KERNEL_ARGS_(ID, FN, ARGS, SUPPORTED) \
  template <>                                     \
  struct KernelArgs<TNK_K_##ID> {                 \
    using type = ARGS;                            \
  };
TNK_KERNELS(TNX_KERNEL_ARGS_)
#undef TNX_KERNEL_ARGS_
void launch_kernel_id(c10::DeviceIndex device, tnk_kernel_t kernel, const void *args, size_t size,
                      const char *name, int64_t elems);
template <tnk_kernel_t K>
inline void launch_kernel(c10::DeviceIndex device, const typename KernelArgs<K>::type &args,
                          const char *name, int64_t elems = -1) {
  static_assert(sizeof args <= TNRT_KERNEL_ARGS_MAX, "kernel descriptor too large for a launch");
  launch_kernel_id(device, K, &args, sizeof args, name, elems);
}
// The provider in use, chosen on the first call (RuntimeError naming
// TORCH_NEURONX_KERNEL_PROVIDER for an unknown name).
const tnrt_kernel_provider_t *kernel_provider();
// A support query: the operation code and dtypes a kernel's descriptor
// would carry (-1: not applicable; kernels/kernel_list.h says which a kernel reads).
inline tnrt_kernel_query_t kernel_query(int op, int dtype, int dtype2, int mode) {
  return {op, dtype, dtype2, mode};
}
// Whether the provider in use runs kernel K for the query.
bool kernel_supported(tnk_kernel_t kernel, const tnrt_kernel_query_t &q);
// Queues host code fn(args) on the device's current stream: Inductor's
// compiled C++, users' C kernels, host copies, measurements. Only a device
// whose provider runs host code takes it (RuntimeError otherwise, naming
// the provider); the software NeuronCore's does.
void launch_host_code(c10::DeviceIndex device, tnrt_task_fn fn, const void *args, size_t size,
                      const char *name, int64_t elems = -1);
// The check launch_host_code makes, for code that queues host tasks on a
// stream of its own choosing (the collectives' communication streams).
void require_host_code(const char *what);
// Memory history (memory_history.cpp): allocations and frees while
// torch.neuron.memory._record_memory_history is on.
bool memory_history_enabled();
void memory_history_alloc(void *ptr, size_t size, int device, int stream);
void memory_history_free(void *ptr, size_t size, int device, int stream);
// The profiler (profiler.cpp): whether a trace is being recorded, and the
// launch of task seq on stream s (host interval [t0, t1]), linked to the CPU
// op that issued it.
bool profiler_recording();
void profiler_note_launch(tnrt_stream_t *s, uint64_t seq, int64_t t0, int64_t t1, const char *name);

// The RNG of a device (generator.cpp).
const at::Generator &default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// Returns the (seed, offset) pair for one kernel call and advances offset.
std::pair<uint64_t, uint64_t> philox_next(std::optional<at::Generator> gen,
                                          c10::DeviceIndex device);

// Profiler: starts/stops collecting device task intervals.
void trace_start();
std::vector<tnrt_trace_record_t> trace_stop();

}  // namespace torch_neuronx
