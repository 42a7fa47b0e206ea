// The device guard (c10::impl::DeviceGuardImplInterface): devices,
// streams and events as torch.neuron / torch.accelerator reach them.
#include "runtime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>

namespace torch_neuronx {

static c10::Stream pool_stream(c10::DeviceIndex device) {
  static std::array<std::atomic<uint32_t>, 128> next{};
  if (device < 0) device = current_device();  // torch.Stream(device="neuron")
  check_device_index(device);
  uint32_t i = next[device]++ % (TNRT_STREAMS_PER_DEVICE - 1 - TNRT_COMM_STREAMS) + 1;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), i);
}

// ------------------------------------------------------------ device guard

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(kNeuron, current_device());
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override { set_current_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    set_current_device_unchecked(d.index());
  }
  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override {
    check_device_index(d.index());
    return c10::Stream(c10::Stream::UNSAFE, d, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return pool_stream(d.index());
  }
  c10::Stream getNewStream(c10::Device d, int) const override { return pool_stream(d.index()); }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(tnrt_device_count());
  }
  void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event device index ",
                device_index, " does not match the recording stream's device ", stream.device());
    auto *e = static_cast<tnrt_event_t *>(*event);
    if (!e) {
      e = tnrt_event_create(flag == c10::EventFlag::BACKEND_DEFAULT ? TNRT_EVENT_TIMING
                                                                    : TNRT_EVENT_DEFAULT);
      TORCH_CHECK(e, "cannot create a neuron event");
      *event = e;
    }
    int dev = tnrt_event_device(e);
    TORCH_CHECK(dev == -1 || dev == stream.device_index(), "event recorded on neuron:", dev,
                " cannot be recorded on a stream of ", stream.device());
    check(tnrt_event_record(e, native_stream(stream)), "event record");
  }
  void block(void *event, const c10::Stream &stream) const override {
    if (!event) return;
    check(tnrt_stream_wait_event(native_stream(stream), static_cast<tnrt_event_t *>(event)),
          "stream wait event");
  }
  bool queryEvent(void *event) const override {
    return !event || tnrt_event_query(static_cast<tnrt_event_t *>(event));
  }
  void synchronizeEvent(void *event) const override {
    if (event)
      check(tnrt_event_synchronize(static_cast<tnrt_event_t *>(event)), "event synchronize");
  }
  void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
    tnrt_event_destroy(static_cast<tnrt_event_t *>(event));
  }
  double elapsedTime(void *a, void *b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b, "both events must be recorded before calling elapsed_time");
    double ms = 0;
    check(
        tnrt_event_elapsed_ms(static_cast<tnrt_event_t *>(a), static_cast<tnrt_event_t *>(b), &ms),
        "elapsed_time");
    return ms;
  }
  // The dtypes a neuron tensor can hold (factories refuse the others).
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device_index(d.has_index() ? d.index() : current_device());
    c10::DeviceCapability cap;  // one bit per ScalarType, all set
    for (size_t i = 0; i < c10::NUMBER_OF_DEVICE_CAPABILITIES; i++) {
      auto t = static_cast<c10::ScalarType>(i);
      if (c10::isQIntType(t) || c10::isBitsType(t))
        cap.capability_data.capability_bits &= ~(uint64_t{1} << i);
    }
    return cap;
  }
  bool queryStream(const c10::Stream &s) const override {
    int idle = 0;  // a faulted stream raises, as CUDA's sticky errors do
    check(tnrt_stream_query_status(native_stream(s), &idle), "stream query");
    return idle != 0;
  }
  void synchronizeStream(const c10::Stream &s) const override {
    check(tnrt_stream_synchronize(native_stream(s)), "stream synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    check_device_index(d);
    check(tnrt_device_synchronize(d), "device synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr &ptr, const c10::Stream &s) const override {
    device_allocator()->recordStream(ptr, s);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace torch_neuronx
