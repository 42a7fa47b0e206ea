// The device allocator (c10::DeviceAllocator over the runtime's caching
// allocator, csrc/runtime/allocator.c): allocation, stream-ordered frees,
// memory stats, and the profiler's and memory history's views of them.
#include "runtime.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <cstring>

namespace torch_neuronx {

// -------------------------------------------------------------- allocator

// torch.profiler(profile_memory=True) and the memory timeline: each
// allocation and free, with the device's totals after it.
static void report_memory(int d, void *ptr, int64_t delta) {
  tnrt_memory_stats_t s;
  if (tnrt_memory_stats(d, &s) != TNRT_OK) return;
  c10::reportMemoryUsageToProfiler(ptr, delta, s.allocated_bytes[0].current,
                                   s.reserved_bytes[0].current,
                                   c10::Device(kNeuron, static_cast<c10::DeviceIndex>(d)));
}

static void free_block(void *ctx) {
  auto *block = static_cast<tnrt_block_t *>(ctx);
  if (block && memory_history_enabled()) {
    int d = tnrt_block_device(block);
    memory_history_free(tnrt_block_ptr(block), tnrt_block_size(block), d, current_stream_index(d));
  }
  if (block && c10::memoryProfilingEnabled()) {
    int64_t size = static_cast<int64_t>(tnrt_block_size(block));
    int d = tnrt_block_device(block);
    void *ptr = tnrt_block_ptr(block);
    tnrt_free(block);
    report_memory(d, ptr, -size);
    return;
  }
  tnrt_free(block);
}

struct NeuronAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex device = current_device();
    check_device_index(device);
    void *ptr = nullptr;
    tnrt_block_t *block = nullptr;
    tnrt_status_t st = tnrt_malloc(device, n, current_native_stream(device), &ptr, &block);
    if (st != TNRT_OK) throw_status(st, "neuron allocation");
    if (block && c10::memoryProfilingEnabled())
      report_memory(device, ptr, static_cast<int64_t>(tnrt_block_size(block)));
    if (block && memory_history_enabled())
      memory_history_alloc(ptr, tnrt_block_size(block), device,
                           static_cast<int>(current_stream(device).id()));
    return {ptr, block, &free_block, c10::Device(kNeuron, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    // Storage-level copies (e.g. deep copies of storages) are stream ordered.
    tnk_copy_args_t a{};
    a.shape.ndim = 1;
    a.shape.sizes[0] = static_cast<int64_t>(count);
    a.dst = {dest, TNK_U8, 0, {1}};
    a.src = {const_cast<void *>(src), TNK_U8, 0, {1}};
    launch_kernel<TNK_K_COPY>(current_device(), a, "copy_data");
  }
  bool initialized() override { return tnrt_is_initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!tnrt_is_initialized()) return;
    for (int d = 0; d < tnrt_device_count(); d++) check(tnrt_empty_cache(d), "empty_cache");
  }
  void recordStream(const c10::DataPtr &ptr, c10::Stream stream) override {
    if (!ptr.get_context() || ptr.get_deleter() != &free_block) return;
    check(tnrt_record_stream(static_cast<tnrt_block_t *>(ptr.get_context()), native_stream(stream)),
          "record_stream");
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    tnrt_memory_stats_t s;
    check(tnrt_memory_stats(device, &s), "memory_stats");
    c10::CachingDeviceAllocator::DeviceStats out;
    auto copy = [](c10::CachingAllocator::StatArray &dst, const tnrt_stat_t *src) {
      for (int i = 0; i < TNRT_POOL_COUNT; i++) {
        dst[i].current = src[i].current;
        dst[i].peak = src[i].peak;
        dst[i].allocated = src[i].allocated;
        dst[i].freed = src[i].freed;
      }
    };
    copy(out.allocation, s.allocation);
    copy(out.segment, s.segment);
    copy(out.active, s.active);
    copy(out.inactive_split, s.inactive_split);
    copy(out.allocated_bytes, s.allocated_bytes);
    copy(out.reserved_bytes, s.reserved_bytes);
    copy(out.active_bytes, s.active_bytes);
    copy(out.inactive_split_bytes, s.inactive_split_bytes);
    copy(out.requested_bytes, s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    out.max_split_size = s.max_split_size;
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    check(tnrt_reset_accumulated_stats(device), "reset_accumulated_stats");
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    check(tnrt_reset_peak_stats(device), "reset_peak_stats");
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    uint64_t free_b = 0, total = 0;
    check(tnrt_mem_get_info(device, &free_b, &total), "mem_get_info");
    return {free_b, total};
  }
};

static NeuronAllocator g_allocator;
c10::DeviceAllocator *device_allocator() { return &g_allocator; }

}  // namespace torch_neuronx
