// The boxed CPU fallback for ops without a native neuron kernel, the
// tracking of ops that ran on it (counts, warn/silent/error modes), and the
// tracking of every op that ran on neuron (get_executed_ops).
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

#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

namespace torch_neuronx {

namespace {

std::mutex g_track_mu;
std::map<std::string, int64_t> g_fallback_counts;  // guarded by g_track_mu
std::set<std::string> g_warned;                    // guarded by g_track_mu
std::string g_mode;                                // guarded by g_track_mu

std::string mode_locked() {
  if (g_mode.empty()) {
    const char *env = std::getenv("TORCH_NEURONX_FALLBACK");
    g_mode = env && *env ? env : "warn";
  }
  return g_mode;
}

// Ops that take CPU index tensors alongside device tensors (as CUDA does).
bool accepts_cpu_tensors(const std::string &name) {
  return name.rfind("aten::index", 0) == 0 || name.rfind("aten::_index_put_impl_", 0) == 0 ||
         name.rfind("aten::_unsafe_index", 0) == 0;
}

struct Devices {
  std::optional<c10::Device> neuron;
  bool cpu_nonscalar = false;
  c10::Device cpu_example{at::kCPU};
};

void note_tensor(const at::Tensor &t, Devices &d) {
  if (!t.defined()) return;
  if (t.is_privateuseone()) {
    if (!d.neuron) {
      d.neuron = t.device();
    } else {
      TORCH_CHECK(*d.neuron == t.device(),
                  "Expected all tensors to be on the same device, but found "
                  "at least two devices, ",
                  *d.neuron, " and ", t.device(), "!");
    }
  } else if (t.dim() > 0) {
    d.cpu_nonscalar = true;
    d.cpu_example = t.device();
  }
}

void visit_tensors(const c10::IValue &v, Devices &d) {
  if (v.isTensor()) {
    note_tensor(v.toTensor(), d);
  } else if (v.isTensorList()) {
    for (const at::Tensor &t : v.toTensorList()) note_tensor(t, d);
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor> &t : v.toOptionalTensorList())
      if (t.has_value()) note_tensor(*t, d);
  } else if (v.isList()) {
    for (const c10::IValue &e : v.toListRef()) visit_tensors(e, d);
  }
}

c10::IValue to_host(const c10::IValue &v, HostViews &host, bool written) {
  if (v.isTensor()) return host.view(v.toTensor(), written);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor &t : v.toTensorList()) out.push_back(host.view(t, written));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor> &t : v.toOptionalTensorList())
      out.push_back(t.has_value() ? std::optional<at::Tensor>(host.view(*t, written))
                                  : std::nullopt);
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNeuron) return c10::IValue(c10::Device(at::kCPU));
  return v;
}

at::Tensor to_device(const at::Tensor &t, c10::Device dev) {
  if (!t.defined() || t.device() == dev) return t;
  return t.to(dev);
}

// Rebuilds a CPU view of a host view as the same view of the neuron tensor.
at::Tensor rebase_view(const at::Tensor &cpu_view, const at::Tensor &base, const HostViews &host) {
  const char *b = static_cast<const char *>(host.host_base(base));
  const char *p = static_cast<const char *>(cpu_view.const_data_ptr());
  int64_t offset =
      cpu_view.numel() ? (p - b) / (int64_t)cpu_view.itemsize() : base.storage_offset();
  if (cpu_view.scalar_type() != base.scalar_type()) {
    return base.view(cpu_view.scalar_type())
        .as_strided(cpu_view.sizes(), cpu_view.strides(), offset);
  }
  return base.as_strided(cpu_view.sizes(), cpu_view.strides(), offset);
}

// ------------------------------------------------------------ executed ops
// Every dispatcher call whose arguments hold a neuron tensor (or name the
// neuron device, as factory ops do) is counted by a RecordFunction start
// callback: the dispatcher's documented observation hook, the one the
// profiler uses. It sees each call once, at its entry (redispatches to
// lower keys are not calls), nested calls of composite ops included, on
// every thread (autograd's too). Boxing the arguments for the callback
// costs per op, so the callback is installed only while tracking is on.

std::mutex g_exec_mu;
std::unordered_map<c10::OperatorName, int64_t> g_exec_counts;  // guarded by g_exec_mu
at::CallbackHandle g_exec_handle = 0;                          // guarded by g_exec_mu

bool names_neuron(const c10::IValue &v) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    return t.defined() && t.is_privateuseone();
  }
  if (v.isTensorList()) {
    for (const at::Tensor &t : v.toTensorList())
      if (t.defined() && t.is_privateuseone()) return true;
    return false;
  }
  if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor> &t : v.toOptionalTensorList())
      if (t.has_value() && t->defined() && t->is_privateuseone()) return true;
    return false;
  }
  if (v.isList()) {
    for (const c10::IValue &e : v.toListRef())
      if (names_neuron(e)) return true;
    return false;
  }
  if (v.isDevice()) return v.toDevice().type() == kNeuron;
  return false;
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction &fn) {
  std::optional<c10::OperatorName> name = fn.operator_name();
  if (!name) return nullptr;
  for (const c10::IValue &v : fn.inputs()) {
    if (names_neuron(v)) {
      std::lock_guard<std::mutex> lock(g_exec_mu);
      g_exec_counts[*name]++;
      break;
    }
  }
  return nullptr;
}

}  // namespace

void set_op_tracking(bool on) {
  std::lock_guard<std::mutex> lock(g_exec_mu);
  if (on && !g_exec_handle) {
    g_exec_handle = at::addGlobalCallback(at::RecordFunctionCallback(on_op_start)
                                              .needsInputs(true)
                                              .scopes({at::RecordScope::FUNCTION}));
  } else if (!on && g_exec_handle) {
    at::removeCallback(g_exec_handle);
    g_exec_handle = 0;
  }
}

bool op_tracking() {
  std::lock_guard<std::mutex> lock(g_exec_mu);
  return g_exec_handle != 0;
}

std::vector<std::pair<std::string, int64_t>> executed_ops() {
  std::lock_guard<std::mutex> lock(g_exec_mu);
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(g_exec_counts.size());
  for (const auto &[name, count] : g_exec_counts) out.emplace_back(c10::toString(name), count);
  std::sort(out.begin(), out.end());
  return out;
}

void note_fallback(const std::string &name) {
  std::lock_guard<std::mutex> lock(g_track_mu);
  g_fallback_counts[name]++;
  std::string mode = mode_locked();
  if (mode == "error") {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", name,
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

void neuron_cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const c10::FunctionSchema &schema = op.schema();
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  note_fallback(name);

  const auto &args = schema.arguments();
  const size_t num_args = args.size();
  const size_t base = stack->size() - num_args;

  Devices devs;
  for (size_t i = 0; i < num_args; i++) {
    const c10::IValue &v = (*stack)[base + i];
    visit_tensors(v, devs);
    if (v.isDevice() && v.toDevice().type() == kNeuron && !devs.neuron) {
      c10::Device d = v.toDevice();
      devs.neuron = c10::Device(kNeuron, d.has_index() ? d.index() : current_device());
    }
  }
  if (devs.neuron && devs.cpu_nonscalar && !accepts_cpu_tensors(name)) {
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                *devs.neuron, " and ", devs.cpu_example, "! (when checking arguments for ", name,
                ")");
  }
  c10::Device target = devs.neuron.value_or(c10::Device(kNeuron, current_device()));
  c10::DeviceGuard guard(target);
  check(tnrt_stream_synchronize(current_native_stream(target.index())), "stream synchronize");

  // Originals of every argument, and CPU temporaries for out= arguments.
  std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  HostViews host;
  std::vector<at::Tensor> out_tmp(num_args);
  for (size_t i = 0; i < num_args; i++) {
    c10::IValue &v = (*stack)[base + i];
    if (args[i].is_out() && v.isTensor() && v.toTensor().is_privateuseone()) {
      out_tmp[i] = host.view(v.toTensor(), false).clone(at::MemoryFormat::Preserve);
      v = out_tmp[i];
    }
  }
  // An input that is the out= tensor itself (addr_ is addr.out(self, out=self))
  // is passed as that same temporary: the CPU kernel then sees the read-write
  // operand it would have seen, and raises rather than resizing it.
  auto out_temporary_of = [&](const c10::IValue &v) -> const at::Tensor * {
    if (!v.isTensor()) return nullptr;
    for (size_t k = 0; k < num_args; k++)
      if (out_tmp[k].defined() && originals[k].toTensor().is_same(v.toTensor())) return &out_tmp[k];
    return nullptr;
  };
  for (size_t i = 0; i < num_args; i++) {
    if (out_tmp[i].defined()) continue;
    c10::IValue &v = (*stack)[base + i];
    const at::Tensor *shared = out_temporary_of(v);
    // in-place arguments (and _foreach_ lists) are written through their views
    bool written = args[i].alias_info() && args[i].alias_info()->isWrite();
    v = shared ? c10::IValue(*shared) : to_host(v, host, written);
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  host.write_back();  // staged device memory the kernel wrote goes back

  // Write out= temporaries back into the neuron tensors.
  for (size_t i = 0; i < num_args; i++) {
    if (!out_tmp[i].defined()) continue;
    const at::Tensor &orig = originals[i].toTensor();
    const at::Tensor &tmp = out_tmp[i];
    if (orig.sizes() != tmp.sizes()) {
      // the CPU kernel resized it: take its layout too (linalg_lstsq's
      // column-major solution), as the CPU out tensor has it
      orig.resize_(tmp.sizes());
      if (tmp.is_non_overlapping_and_dense() && orig.strides() != tmp.strides())
        orig.as_strided_(tmp.sizes(), tmp.strides(), orig.storage_offset());
    }
    orig.copy_(tmp);
  }

  const auto &rets = schema.returns();
  const size_t num_rets = rets.size();
  const size_t rbase = stack->size() - num_rets;
  for (size_t j = 0; j < num_rets; j++) {
    c10::IValue &r = (*stack)[rbase + j];
    const c10::AliasInfo *alias = rets[j].alias_info();
    // Which argument the result aliases, if any.
    int aliased = -1;
    if (alias) {
      for (size_t i = 0; i < num_args; i++)
        if (args[i].alias_info() && args[i].alias_info()->beforeSets() == alias->beforeSets())
          aliased = static_cast<int>(i);
    }
    if (alias && alias->isWrite() && aliased >= 0) {
      r = originals[aliased];  // in-place / out=: the neuron tensor itself
    } else if (alias && aliased >= 0 && originals[aliased].isTensor() && r.isTensor()) {
      r = rebase_view(r.toTensor(), originals[aliased].toTensor(), host);
    } else if (alias && aliased >= 0 && originals[aliased].isTensor() && r.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor &t : r.toTensorList())
        out.push_back(rebase_view(t, originals[aliased].toTensor(), host));
      r = out;
    } else if (r.isTensor()) {
      r = to_device(r.toTensor(), target);
    } else if (r.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor &t : r.toTensorList()) out.push_back(to_device(t, target));
      r = out;
    } else if (r.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const std::optional<at::Tensor> &t : r.toOptionalTensorList())
        out.push_back(t.has_value() ? std::optional<at::Tensor>(to_device(*t, target))
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
  {
    std::lock_guard<std::mutex> lock(g_track_mu);
    g_fallback_counts.clear();
    g_warned.clear();
  }
  std::lock_guard<std::mutex> lock(g_exec_mu);
  g_exec_counts.clear();
}

void set_fallback_mode(const std::string &mode) {
  TORCH_CHECK(mode == "warn" || mode == "error" || mode == "silent",
              "fallback mode must be 'warn', 'silent' or 'error', got '", mode, "'");
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

}  // namespace torch_neuronx
