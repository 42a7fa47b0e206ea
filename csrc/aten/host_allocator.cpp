// Pinned host memory (csrc/runtime/host_memory.c) as at::HostAllocator.
#include "runtime.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace torch_neuronx {

static void free_host(void *ptr);

// Pinned host memory (host_memory.c), as at::HostAllocator so that
// torch.accelerator's host-cache calls and host_memory_stats reach it.
// Frees are deferred by the runtime until recorded streams pass them; there
// is no cache of free blocks to release.
struct PinnedHostAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t n) override {
    void *p = n ? tnrt_host_alloc(n) : nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, !n || p, "cannot allocate ", n,
                     " bytes of pinned host memory");
    if (p) {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[p] = n;
      for (auto *s : {&stats_.allocations, &stats_.active_requests}) s->increase(1);
      for (auto *s : {&stats_.allocated_bytes, &stats_.active_bytes}) s->increase(n);
      stats_.num_host_alloc++;
    }
    return {p, p, &free_host, c10::Device(c10::DeviceType::CPU)};
  }
  void release(void *p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(p);
      if (it != sizes_.end()) {
        for (auto *s : {&stats_.allocations, &stats_.active_requests}) s->decrease(1);
        for (auto *s : {&stats_.allocated_bytes, &stats_.active_bytes}) s->decrease(it->second);
        stats_.num_host_free++;
        sizes_.erase(it);
      }
    }
    tnrt_host_free(p);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_host; }
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void *ptr, void *, c10::Stream stream) override {
    if (!ptr || !tnrt_host_is_pinned(ptr)) return false;
    check(tnrt_host_record_stream(ptr, native_stream(stream)), "record pinned buffer");
    return true;
  }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto *s : {&stats_.allocations, &stats_.active_requests, &stats_.allocated_bytes,
                    &stats_.active_bytes})
      s->reset_accumulated();
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto *s : {&stats_.allocations, &stats_.active_requests, &stats_.allocated_bytes,
                    &stats_.active_bytes})
      s->reset_peak();
  }

 private:
  std::mutex mu_;
  std::unordered_map<void *, size_t> sizes_;
  at::HostStats stats_;
};

static PinnedHostAllocator g_host_allocator;
static void free_host(void *ptr) { g_host_allocator.release(ptr); }
c10::Allocator *host_allocator() { return &g_host_allocator; }
REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_host_allocator)

}  // namespace torch_neuronx
