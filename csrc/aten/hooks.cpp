// The PrivateUse1 hooks (at::PrivateUse1HooksInterface) and the one-time
// registration of allocator and hooks with PyTorch (register_runtime).
#include "runtime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/CallOnce.h>

#include <algorithm>

namespace torch_neuronx {

// ------------------------------------------------------------------ hooks

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return tnrt_device_count() > 0; }
  const at::Generator &getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  at::Device getDeviceFromPtr(void *data) const override {
    int d = tnrt_ptr_device(data);
    TORCH_CHECK(d >= 0, "pointer ", data, " is not neuron device memory");
    return at::Device(kNeuron, static_cast<c10::DeviceIndex>(d));
  }
  bool isPinnedPtr(const void *data) const override { return tnrt_host_is_pinned(data); }
  at::Allocator *getPinnedMemoryAllocator() const override { return host_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return tnrt_is_initialized(); }
  void init() const override { lazy_init(); }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(tnrt_device_count());
  }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override {
    c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceIndex device = impl->device().index();
    c10::DeviceIndex prev = current_device();
    set_current_device(device);
    c10::DataPtr fresh = device_allocator()->allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep) {
      device_allocator()->copy_data(fresh.get(), impl->data(), keep);
      // The old block is read by this stream's copy: keep it until then.
      device_allocator()->recordStream(impl->data_ptr(), current_stream(device));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
    set_current_device(prev);
  }
};

void register_runtime() {
  static c10::once_flag once;
  c10::call_once(once, [] {
    c10::SetAllocator(kNeuron, device_allocator());
    at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
    tnk_set_parallel(reinterpret_cast<tnk_parallel_fn>(&tnrt_parallel_for));
    tnk_set_num_threads(tnrt_num_threads());
  });
}

}  // namespace torch_neuronx
