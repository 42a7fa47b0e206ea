// The boxed CPU fallback for ops without a native neuron kernel, the
// autocast op lists and the legacy profiler stubs.
//
// Inputs reach the CPU kernel as host views (HostViews, after the streams
// that produce them are synchronised): zero-copy aliases where the HAL says
// device memory is host addressable, staged copies through the HAL where not.
// What the stock at::native::cpu_fallback gets wrong, and how this one
// handles it:
//  - out= arguments may need resizing: they run on a CPU temporary that is
//    resized and copied back into the neuron tensor;
//  - in-place arguments are viewed as written, so the CPU kernel writes
//    device memory (directly, or through the staged copy written back) and
//    the original neuron tensor is returned (identity kept);
//  - a returned view of an input is rebuilt as a view of the neuron input
//    (as_strided), never a copy, so aliasing holds;
//  - the output device is the neuron device of the inputs even when a CPU
//    scalar comes first (reverse ops such as 2 // t), and a factory op's
//    device argument is honoured;
//  - tensors of two devices in one op raise the error CUDA raises.
#include "neuron.h"

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace torch_neuronx {

namespace {

std::mutex g_track_mu;
std::map<std::string, int64_t> g_fallback_counts;  // guarded by g_track_mu
std::set<std::string> g_warned;                    // guarded by g_track_mu
std::string g_mode;                                // guarded by g_track_mu

std::string mode_locked() {
  if (g_mode.empty()) {
    const char* env = std::getenv("TORCH_NEURONX_FALLBACK");
    g_mode = env && *env ? env : "warn";
  }
  return g_mode;
}

// Ops that take CPU index tensors alongside device tensors (as CUDA does).
bool accepts_cpu_tensors(const std::string& name) {
  return name.rfind("aten::index", 0) == 0 ||
         name.rfind("aten::_index_put_impl_", 0) == 0 ||
         name.rfind("aten::_unsafe_index", 0) == 0;
}

struct Devices {
  std::optional<c10::Device> neuron;
  bool cpu_nonscalar = false;
  c10::Device cpu_example{at::kCPU};
};

void note_tensor(const at::Tensor& t, Devices& d) {
  if (!t.defined()) return;
  if (t.is_privateuseone()) {
    if (!d.neuron) {
      d.neuron = t.device();
    } else {
      TORCH_CHECK(*d.neuron == t.device(),
                  "Expected all tensors to be on the same device, but found "
                  "at least two devices, ", *d.neuron, " and ", t.device(), "!");
    }
  } else if (t.dim() > 0) {
    d.cpu_nonscalar = true;
    d.cpu_example = t.device();
  }
}

void visit_tensors(const c10::IValue& v, Devices& d) {
  if (v.isTensor()) {
    note_tensor(v.toTensor(), d);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) note_tensor(t, d);
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
      if (t.has_value()) note_tensor(*t, d);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) visit_tensors(e, d);
  }
}

c10::IValue to_host(const c10::IValue& v, HostViews& host, bool written) {
  if (v.isTensor()) return host.view(v.toTensor(), written);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(host.view(t, written));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList())
      out.push_back(t.has_value() ? std::optional<at::Tensor>(host.view(*t, written))
                                  : std::nullopt);
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNeuron)
    return c10::IValue(c10::Device(at::kCPU));
  return v;
}

at::Tensor to_device(const at::Tensor& t, c10::Device dev) {
  if (!t.defined() || t.device() == dev) return t;
  return t.to(dev);
}

// Rebuilds a CPU view of a host view as the same view of the neuron tensor.
at::Tensor rebase_view(const at::Tensor& cpu_view, const at::Tensor& base,
                       const HostViews& host) {
  const char* b = static_cast<const char*>(host.host_base(base));
  const char* p = static_cast<const char*>(cpu_view.const_data_ptr());
  int64_t offset = cpu_view.numel() ? (p - b) / (int64_t)cpu_view.itemsize()
                                    : base.storage_offset();
  if (cpu_view.scalar_type() != base.scalar_type()) {
    return base.view(cpu_view.scalar_type())
        .as_strided(cpu_view.sizes(), cpu_view.strides(), offset);
  }
  return base.as_strided(cpu_view.sizes(), cpu_view.strides(), offset);
}

}  // namespace

void note_fallback(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_track_mu);
  g_fallback_counts[name]++;
  std::string mode = mode_locked();
  if (mode == "error") {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "The operator '", name,
        "' is not currently implemented for the neuron device, and "
        "TORCH_NEURONX_FALLBACK=error forbids running it on the CPU. Unset "
        "it (or set TORCH_NEURONX_FALLBACK=warn) to use the CPU fallback.");
  }
  if (mode == "warn" && g_warned.insert(name).second) {
    TORCH_WARN("The operator '", name,
               "' is not currently supported natively on the neuron "
               "device; it runs on the CPU, which may be slow. "
               "torch_neuronx.get_fallback_ops() lists such ops; "
               "TORCH_NEURONX_FALLBACK=error makes them errors.");
  }
}

void neuron_cpu_fallback(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  note_fallback(name);

  const auto& args = schema.arguments();
  const size_t num_args = args.size();
  const size_t base = stack->size() - num_args;

  Devices devs;
  for (size_t i = 0; i < num_args; i++) {
    const c10::IValue& v = (*stack)[base + i];
    visit_tensors(v, devs);
    if (v.isDevice() && v.toDevice().type() == kNeuron && !devs.neuron) {
      c10::Device d = v.toDevice();
      devs.neuron = c10::Device(kNeuron, d.has_index() ? d.index()
                                                       : current_device());
    }
  }
  if (devs.neuron && devs.cpu_nonscalar && !accepts_cpu_tensors(name)) {
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ", *devs.neuron, " and ",
                devs.cpu_example, "! (when checking arguments for ", name, ")");
  }
  c10::Device target = devs.neuron.value_or(c10::Device(kNeuron, current_device()));
  c10::DeviceGuard guard(target);
  check(tnrt_stream_synchronize(current_native_stream(target.index())),
        "stream synchronize");

  // Originals of every argument, and CPU temporaries for out= arguments.
  std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  HostViews host;
  std::vector<at::Tensor> out_tmp(num_args);
  for (size_t i = 0; i < num_args; i++) {
    c10::IValue& v = (*stack)[base + i];
    if (args[i].is_out() && v.isTensor() && v.toTensor().is_privateuseone()) {
      out_tmp[i] = host.view(v.toTensor(), false).clone(at::MemoryFormat::Preserve);
      v = out_tmp[i];
    }
  }
  // An input that is the out= tensor itself (addr_ is addr.out(self, out=self))
  // is passed as that same temporary: the CPU kernel then sees the read-write
  // operand it would have seen, and raises rather than resizing it.
  auto out_temporary_of = [&](const c10::IValue& v) -> const at::Tensor* {
    if (!v.isTensor()) return nullptr;
    for (size_t k = 0; k < num_args; k++)
      if (out_tmp[k].defined() && originals[k].toTensor().is_same(v.toTensor()))
        return &out_tmp[k];
    return nullptr;
  };
  for (size_t i = 0; i < num_args; i++) {
    if (out_tmp[i].defined()) continue;
    c10::IValue& v = (*stack)[base + i];
    const at::Tensor* shared = out_temporary_of(v);
    // in-place arguments (and _foreach_ lists) are written through their views
    bool written = args[i].alias_info() && args[i].alias_info()->isWrite();
    v = shared ? c10::IValue(*shared) : to_host(v, host, written);
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  host.write_back();  // staged device memory the kernel wrote goes back

  // Write out= temporaries back into the neuron tensors.
  for (size_t i = 0; i < num_args; i++) {
    if (!out_tmp[i].defined()) continue;
    const at::Tensor& orig = originals[i].toTensor();
    const at::Tensor& tmp = out_tmp[i];
    if (orig.sizes() != tmp.sizes()) orig.resize_(tmp.sizes());
    orig.copy_(tmp);
  }

  const auto& rets = schema.returns();
  const size_t num_rets = rets.size();
  const size_t rbase = stack->size() - num_rets;
  for (size_t j = 0; j < num_rets; j++) {
    c10::IValue& r = (*stack)[rbase + j];
    const c10::AliasInfo* alias = rets[j].alias_info();
    // Which argument the result aliases, if any.
    int aliased = -1;
    if (alias) {
      for (size_t i = 0; i < num_args; i++)
        if (args[i].alias_info() &&
            args[i].alias_info()->beforeSets() == alias->beforeSets())
          aliased = static_cast<int>(i);
    }
    if (alias && alias->isWrite() && aliased >= 0) {
      r = originals[aliased];  // in-place / out=: the neuron tensor itself
    } else if (alias && aliased >= 0 && originals[aliased].isTensor() &&
               r.isTensor()) {
      r = rebase_view(r.toTensor(), originals[aliased].toTensor(), host);
    } else if (alias && aliased >= 0 && originals[aliased].isTensor() &&
               r.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : r.toTensorList())
        out.push_back(rebase_view(t, originals[aliased].toTensor(), host));
      r = out;
    } else if (r.isTensor()) {
      r = to_device(r.toTensor(), target);
    } else if (r.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : r.toTensorList())
        out.push_back(to_device(t, target));
      r = out;
    } else if (r.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const std::optional<at::Tensor>& t : r.toOptionalTensorList())
        out.push_back(t.has_value() ? std::optional<at::Tensor>(
                                          to_device(*t, target))
                                    : std::nullopt);
      r = out;
    }
  }
}

std::vector<std::pair<std::string, int64_t>> fallback_ops() {
  std::lock_guard<std::mutex> lock(g_track_mu);
  return {g_fallback_counts.begin(), g_fallback_counts.end()};
}

void clear_op_tracking() {
  std::lock_guard<std::mutex> lock(g_track_mu);
  g_fallback_counts.clear();
  g_warned.clear();
}

void set_fallback_mode(const std::string& mode) {
  TORCH_CHECK(mode == "warn" || mode == "error" || mode == "silent",
              "fallback mode must be 'warn', 'silent' or 'error', got '", mode,
              "'");
  std::lock_guard<std::mutex> lock(g_track_mu);
  g_mode = mode;
}

std::string fallback_mode() {
  std::lock_guard<std::mutex> lock(g_track_mu);
  return mode_locked();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_cpu_fallback>());
}

// ------------------------------------------------------------- convolution
// The convolutions the native path (conv_ops.cpp) does not take, transposed
// and 3-D ones, run as CPU convolutions on host aliases, counted as
// fallbacks like any other.

namespace {

at::Tensor sync_alias(const at::Tensor& t, HostViews& host) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  check(tnrt_stream_synchronize(current_native_stream(t.device().index())),
        "stream synchronize");
  return host.view(t, false);
}

}  // namespace

at::Tensor conv_cpu(const at::Tensor& input, const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias,
                             at::IntArrayRef stride, at::IntArrayRef padding,
                             at::IntArrayRef dilation, bool transposed,
                             at::IntArrayRef output_padding, int64_t groups) {
  note_fallback("aten::convolution_overrideable");
  c10::DeviceGuard guard(input.device());
  HostViews host;
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = sync_alias(*bias, host);
  at::Tensor out = at::convolution(sync_alias(input, host), sync_alias(weight, host), b, stride,
                                   padding, dilation, transposed, output_padding,
                                   groups);
  return out.to(input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv_cpu_backward(
    const at::Tensor& grad_output, const at::Tensor& input,
    const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  note_fallback("aten::convolution_backward_overrideable");
  c10::DeviceGuard guard(input.device());
  int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::vector<int64_t> bias_sizes{out_channels};
  HostViews host;
  auto r = at::convolution_backward(sync_alias(grad_output, host), sync_alias(input, host),
                                    sync_alias(weight, host), at::OptionalIntArrayRef(bias_sizes),
                                    stride, padding, dilation, transposed,
                                    output_padding, groups, output_mask);
  auto dev = [&](const at::Tensor& t) {
    return t.defined() ? t.to(input.device()) : t;
  };
  return {dev(std::get<0>(r)), dev(std::get<1>(r)), dev(std::get<2>(r))};
}

// ---------------------------------------------------------------- autocast
// The standard op lists PyTorch defines for every autocast backend.

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuronx

// The list macros name ATen types unqualified: expand them in at::autocast.
namespace at::autocast {
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER)
#undef NEURON_LOWER
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NEURON_FP32)
#undef NEURON_FP32
#define NEURON_FP32_OPT(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_OPT)
#undef NEURON_FP32_OPT
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_PROMOTE
}
}  // namespace at::autocast

namespace torch_neuronx {

// ---------------------------------------------------------------- profiler
// Legacy stubs: each profiled op records a timing event on the current
// stream before and after it, so its device time is measured on the stream.

namespace {
struct NeuronProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device,
              torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    c10::DeviceIndex d = current_device();
    if (device) *device = d;
    tnrt_event_t* e = tnrt_event_create(TNRT_EVENT_TIMING);
    tnrt_event_record(e, current_native_stream(d));
    *event = std::shared_ptr<void>(e, [](void* p) {
      tnrt_event_destroy(static_cast<tnrt_event_t*>(p));
    });
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(
      const torch::profiler::impl::ProfilerVoidEventStub* a,
      const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    double ms = 0;
    tnrt_event_elapsed_ms(static_cast<tnrt_event_t*>(a->get()),
                          static_cast<tnrt_event_t*>(b->get()), &ms);
    return static_cast<float>(ms * 1000.0);  // microseconds
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    c10::DeviceIndex prev = current_device();
    for (int d = 0; d < tnrt_device_count(); d++) {
      set_current_device(static_cast<c10::DeviceIndex>(d));
      op(d);
    }
    set_current_device(prev);
  }
  void synchronize() const override {
    for (int d = 0; d < tnrt_device_count(); d++)
      check(tnrt_device_synchronize(d), "synchronize");
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register_stubs;
}  // namespace

}  // namespace torch_neuronx
