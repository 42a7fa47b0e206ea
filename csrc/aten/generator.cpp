// The device RNG: one Philox generator (seed, offset) per device; each
// kernel call takes the pair and advances the offset.
#include "runtime.h"

#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace torch_neuronx {

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
  void set_state(const c10::TensorImpl &state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16,
                "expected a torch.ByteTensor of 16 bytes as the neuron RNG "
                "state, got ",
                state.numel(), " elements of ", state.dtype());
    const uint8_t *p = static_cast<const uint8_t *>(state.data());
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
  NeuronGenerator *clone_impl() const override {
    auto *g = new NeuronGenerator(device().index());
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

const at::Generator &default_generator(c10::DeviceIndex device) {
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
  // A seed and offset baked into a captured graph would repeat the same
  // numbers at every replay: refuse rather than return them silently.
  TORCH_CHECK(!tnrt_stream_is_capturing(current_native_stream(device)),
              "random number generation inside a NeuronGraph capture is not supported yet (every "
              "replay would repeat the captured numbers); draw them before the capture into a "
              "static tensor");
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  TORCH_CHECK(g.device().type() == kNeuron,
              "expected a neuron generator for a neuron tensor, got a ", g.device(), " generator");
  std::lock_guard<std::mutex> lock(g.mutex());
  auto *impl = g.get<NeuronGenerator>();
  uint64_t offset = impl->get_offset();
  impl->set_offset(offset + 1);
  return {impl->current_seed(), offset};
}

}  // namespace torch_neuronx
