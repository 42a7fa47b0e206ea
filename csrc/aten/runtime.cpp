// PyTorch's view of the runtime: device allocator, pinned host allocator,
// device guard (devices, streams, events), PrivateUse1 hooks and the RNG.
#include "neuron.h"

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/CallOnce.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace torch_neuronx {

// ---------------------------------------------------------------- errors

[[noreturn]] void throw_status(tnrt_status_t status, const char* what) {
  std::string detail = tnrt_last_error();
  switch (status) {
    case TNRT_ERR_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron out of memory. ",
                       detail);
    case TNRT_ERR_FORKED:
      TORCH_CHECK(false,
                  "Cannot re-initialize neuron in forked subprocess. To use "
                  "neuron with multiprocessing, you must use the 'spawn' start "
                  "method (multiprocessing.set_start_method('spawn')).");
    case TNRT_ERR_INVALID_DEVICE:
      TORCH_CHECK(false, "neuron error: invalid device ordinal: ", detail);
    case TNRT_ERR_CONFIG:
      TORCH_CHECK(false, "neuron runtime configuration error: ", detail);
    case TNRT_ERR_DEVICE_INDEX:
      TORCH_CHECK_INDEX(false, detail);
    case TNRT_ERR_DEVICE_ASSERT:
      TORCH_CHECK(false, detail);
    default:
      TORCH_CHECK(false, what, ": ", tnrt_status_to_string(status), ". ",
                  detail);
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
  TORCH_CHECK(index >= 0 && index < n,
              "neuron error: invalid device ordinal: device index ",
              static_cast<int>(index),
              " is out of range; ", n,
              " neuron device(s) are visible (set NEURON_RT_VISIBLE_CORES to "
              "choose them)");
}

// ------------------------------------------------------ devices, streams

static thread_local c10::DeviceIndex t_device = 0;
static thread_local std::array<int8_t, 128> t_stream{};  // index per device

c10::DeviceIndex current_device() { return t_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_device = index;
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = t_device;
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device),
                     t_stream[device]);
}

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNeuron,
              "expected a neuron stream, got a stream of ", stream.device());
  check_device_index(stream.device_index());
  t_stream[stream.device_index()] = static_cast<int8_t>(stream.id());
}

tnrt_stream_t* native_stream(const c10::Stream& stream) {
  lazy_init();
  tnrt_stream_t* s =
      tnrt_stream_get(stream.device_index(), static_cast<int>(stream.id()));
  TORCH_CHECK(s, "invalid neuron stream ", stream.id(), " on device ",
              stream.device());
  return s;
}

static c10::Stream pool_stream(c10::DeviceIndex device) {
  static std::array<std::atomic<uint32_t>, 128> next{};
  if (device < 0) device = t_device;  // torch.Stream(device="neuron")
  check_device_index(device);
  uint32_t i = next[device]++ % (TNRT_STREAMS_PER_DEVICE - 1) + 1;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), i);
}

void launch(c10::DeviceIndex device, tnrt_task_fn fn, const void* args,
            size_t size, const char* name) {
  tnrt_stream_t* s = current_native_stream(device);
  if (!profiler_recording()) {
    check(tnrt_launch(s, fn, args, size, name), "neuron kernel launch");
    return;
  }
  int64_t t0 = tnrt_now_ns();
  uint64_t seq = 0;
  check(tnrt_launch_seq(s, fn, args, size, name, &seq), "neuron kernel launch");
  profiler_note_launch(s, seq, t0, tnrt_now_ns(), name);
}

// -------------------------------------------------------------- allocator

// torch.profiler(profile_memory=True) and the memory timeline: each
// allocation and free, with the device's totals after it.
static void report_memory(int d, void* ptr, int64_t delta) {
  tnrt_memory_stats_t s;
  if (tnrt_memory_stats(d, &s) != TNRT_OK) return;
  c10::reportMemoryUsageToProfiler(ptr, delta, s.allocated_bytes[0].current,
                                   s.reserved_bytes[0].current,
                                   c10::Device(kNeuron, static_cast<c10::DeviceIndex>(d)));
}

static void free_block(void* ctx) {
  auto* block = static_cast<tnrt_block_t*>(ctx);
  if (block && memory_history_enabled()) {
    int d = tnrt_block_device(block);
    memory_history_free(tnrt_block_ptr(block), tnrt_block_size(block), d,
                        static_cast<int>(t_stream[d]));
  }
  if (block && c10::memoryProfilingEnabled()) {
    int64_t size = static_cast<int64_t>(tnrt_block_size(block));
    int d = tnrt_block_device(block);
    void* ptr = tnrt_block_ptr(block);
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
    void* ptr = nullptr;
    tnrt_block_t* block = nullptr;
    tnrt_status_t st =
        tnrt_malloc(device, n, current_native_stream(device), &ptr, &block);
    if (st != TNRT_OK) throw_status(st, "neuron allocation");
    if (block && c10::memoryProfilingEnabled())
      report_memory(device, ptr, static_cast<int64_t>(tnrt_block_size(block)));
    if (block && memory_history_enabled())
      memory_history_alloc(ptr, tnrt_block_size(block), device,
                           static_cast<int>(current_stream(device).id()));
    return {ptr, block, &free_block, c10::Device(kNeuron, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Storage-level copies (e.g. deep copies of storages) are stream ordered.
    tnk_copy_args_t a{};
    a.shape.ndim = 1;
    a.shape.sizes[0] = static_cast<int64_t>(count);
    a.dst = {dest, TNK_U8, 0, {1}};
    a.src = {const_cast<void*>(src), TNK_U8, 0, {1}};
    launch(current_device(),
           [](void* p) { tnk_copy(static_cast<tnk_copy_args_t*>(p)); }, &a,
           sizeof a, "copy_data");
  }
  bool initialized() override { return tnrt_is_initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!tnrt_is_initialized()) return;
    for (int d = 0; d < tnrt_device_count(); d++)
      check(tnrt_empty_cache(d), "empty_cache");
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (!ptr.get_context() || ptr.get_deleter() != &free_block) return;
    check(tnrt_record_stream(static_cast<tnrt_block_t*>(ptr.get_context()),
                             native_stream(stream)),
          "record_stream");
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override {
    check_device_index(device);
    tnrt_memory_stats_t s;
    check(tnrt_memory_stats(device, &s), "memory_stats");
    c10::CachingDeviceAllocator::DeviceStats out;
    auto copy = [](c10::CachingAllocator::StatArray& dst,
                   const tnrt_stat_t* src) {
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
c10::DeviceAllocator* device_allocator() { return &g_allocator; }

static void free_host(void* ptr);

// Pinned host memory (host_memory.c), as at::HostAllocator so that
// torch.accelerator's host-cache calls and host_memory_stats reach it.
// Frees are deferred by the runtime until recorded streams pass them; there
// is no cache of free blocks to release.
struct PinnedHostAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? tnrt_host_alloc(n) : nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, !n || p,
                     "cannot allocate ", n, " bytes of pinned host memory");
    if (p) {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[p] = n;
      for (auto* s : {&stats_.allocations, &stats_.active_requests}) s->increase(1);
      for (auto* s : {&stats_.allocated_bytes, &stats_.active_bytes}) s->increase(n);
      stats_.num_host_alloc++;
    }
    return {p, p, &free_host, c10::Device(c10::DeviceType::CPU)};
  }
  void release(void* p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(p);
      if (it != sizes_.end()) {
        for (auto* s : {&stats_.allocations, &stats_.active_requests}) s->decrease(1);
        for (auto* s : {&stats_.allocated_bytes, &stats_.active_bytes}) s->decrease(it->second);
        stats_.num_host_free++;
        sizes_.erase(it);
      }
    }
    tnrt_host_free(p);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_host; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void* ptr, void*, c10::Stream stream) override {
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
    for (auto* s : {&stats_.allocations, &stats_.active_requests,
                    &stats_.allocated_bytes, &stats_.active_bytes})
      s->reset_accumulated();
    stats_.num_host_alloc = stats_.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* s : {&stats_.allocations, &stats_.active_requests,
                    &stats_.allocated_bytes, &stats_.active_bytes})
      s->reset_peak();
  }

 private:
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
  at::HostStats stats_;
};

static PinnedHostAllocator g_host_allocator;
static void free_host(void* ptr) { g_host_allocator.release(ptr); }
c10::Allocator* host_allocator() { return &g_host_allocator; }
REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_host_allocator)

// -------------------------------------------------------------------- RNG

struct NeuronGenerator final : c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(kNeuron, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(s);
    return s;
  }
  // State: 16 bytes, seed then offset (little endian), in a CPU uint8 tensor.
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                    state.numel() == 16,
                "expected a torch.ByteTensor of 16 bytes as the neuron RNG "
                "state, got ", state.numel(), " elements of ", state.dtype());
    const uint8_t* p = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, p, 8);
    std::memcpy(&offset_, p + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::empty({16}, at::kByte);
    std::memcpy(t.data_ptr<uint8_t>(), &seed_, 8);
    std::memcpy(t.data_ptr<uint8_t>() + 8, &offset_, 8);
    return t.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* g = new NeuronGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<NeuronGenerator>(device);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> gens;
  std::call_once(once, [] {
    lazy_init();
    for (int d = 0; d < tnrt_device_count(); d++)
      gens.push_back(at::make_generator<NeuronGenerator>(d));
  });
  if (device < 0) device = current_device();
  check_device_index(device);
  return gens[device];
}

std::pair<uint64_t, uint64_t> philox_next(std::optional<at::Generator> gen,
                                          c10::DeviceIndex device) {
  at::Generator g = gen.has_value() && gen->defined()
                        ? *gen
                        : default_generator(device);
  TORCH_CHECK(g.device().type() == kNeuron,
              "expected a neuron generator for a neuron tensor, got a ",
              g.device(), " generator");
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<NeuronGenerator>();
  uint64_t offset = impl->get_offset();
  impl->set_offset(offset + 1);
  return {impl->current_seed(), offset};
}

// ------------------------------------------------------------ device guard

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(kNeuron, current_device());
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kNeuron, current_device());
  }
  void setDevice(c10::Device d) const override {
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < tnrt_device_count()) t_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    return current_stream(d.index());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    check_device_index(d.index());
    return c10::Stream(c10::Stream::UNSAFE, d, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return pool_stream(d.index());
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return pool_stream(d.index());
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(tnrt_device_count());
  }
  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event device index ", device_index,
                " does not match the recording stream's device ",
                stream.device());
    auto* e = static_cast<tnrt_event_t*>(*event);
    if (!e) {
      e = tnrt_event_create(flag == c10::EventFlag::BACKEND_DEFAULT
                                ? TNRT_EVENT_TIMING
                                : TNRT_EVENT_DEFAULT);
      TORCH_CHECK(e, "cannot create a neuron event");
      *event = e;
    }
    int dev = tnrt_event_device(e);
    TORCH_CHECK(dev == -1 || dev == stream.device_index(),
                "event recorded on neuron:", dev,
                " cannot be recorded on a stream of ", stream.device());
    check(tnrt_event_record(e, native_stream(stream)), "event record");
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    check(tnrt_stream_wait_event(native_stream(stream),
                                 static_cast<tnrt_event_t*>(event)),
          "stream wait event");
  }
  bool queryEvent(void* event) const override {
    return !event || tnrt_event_query(static_cast<tnrt_event_t*>(event));
  }
  void synchronizeEvent(void* event) const override {
    if (event)
      check(tnrt_event_synchronize(static_cast<tnrt_event_t*>(event)),
            "event synchronize");
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    tnrt_event_destroy(static_cast<tnrt_event_t*>(event));
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b,
                "both events must be recorded before calling elapsed_time");
    double ms = 0;
    check(tnrt_event_elapsed_ms(static_cast<tnrt_event_t*>(a),
                                static_cast<tnrt_event_t*>(b), &ms),
          "elapsed_time");
    return ms;
  }
  // The dtypes a neuron tensor can hold (factories refuse the others).
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device_index(d.has_index() ? d.index() : current_device());
    c10::DeviceCapability cap;  // one bit per ScalarType, all set
    for (size_t i = 0; i < c10::NUMBER_OF_DEVICE_CAPABILITIES; i++) {
      auto t = static_cast<c10::ScalarType>(i);
      if (c10::isQIntType(t) || c10::isBitsType(t) || t == at::kComplexHalf)
        cap.capability_data.capability_bits &= ~(uint64_t{1} << i);
    }
    return cap;
  }
  bool queryStream(const c10::Stream& s) const override {
    int idle = 0;  // a faulted stream raises, as CUDA's sticky errors do
    check(tnrt_stream_query_status(native_stream(s), &idle), "stream query");
    return idle != 0;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check(tnrt_stream_synchronize(native_stream(s)), "stream synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    check_device_index(d);
    check(tnrt_device_synchronize(d), "device synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr,
                             const c10::Stream& s) const override {
    g_allocator.recordStream(ptr, s);
  }
};

// ------------------------------------------------------------------ hooks

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return tnrt_device_count() > 0; }
  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int d = tnrt_ptr_device(data);
    TORCH_CHECK(d >= 0, "pointer ", data, " is not neuron device memory");
    return at::Device(kNeuron, static_cast<c10::DeviceIndex>(d));
  }
  bool isPinnedPtr(const void* data) const override {
    return tnrt_host_is_pinned(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return &g_host_allocator;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return tnrt_is_initialized();
  }
  void init() const override { lazy_init(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(tnrt_device_count());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    set_current_device(d);
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceIndex device = impl->device().index();
    c10::DeviceIndex prev = current_device();
    set_current_device(device);
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep) {
      g_allocator.copy_data(fresh.get(), impl->data(), keep);
      // The old block is read by this stream's copy: keep it until then.
      g_allocator.recordStream(impl->data_ptr(), current_stream(device));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
    set_current_device(prev);
  }
};

void trace_start() { tnrt_trace_start(); }

std::vector<tnrt_trace_record_t> trace_stop() {
  std::vector<tnrt_trace_record_t> out(65536);
  out.resize(tnrt_trace_stop(out.data(), out.size()));
  return out;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

void register_runtime() {
  static c10::once_flag once;
  c10::call_once(once, [] {
    c10::SetAllocator(kNeuron, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
    tnk_set_parallel(reinterpret_cast<tnk_parallel_fn>(&tnrt_parallel_for));
    tnk_set_num_threads(tnrt_num_threads());
  });
}

}  // namespace torch_neuronx
