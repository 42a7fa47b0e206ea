// Nested tensors (torch.nested, strided layout) on neuron.
//
// PyTorch gives PrivateUse1 devices nested-tensor fast paths without kernels:
// nn.TransformerEncoder in eval mode with a src_key_padding_mask packs the
// batch into a nested tensor on the input's device (transformer.py lists the
// PrivateUse1 device beside cpu and cuda) and runs every layer on it, and
// without a NestedTensorPrivateUse1 kernel for _to_copy even moving one to
// the CPU raised. A nested tensor is a dense buffer with per-entry sizes,
// strides and offsets; ATen's own device-generic nested kernels for copies,
// empty_like, clone and alias work on any device's buffer, so they are
// registered here as they are for CUDA. Every other nested op runs through
// the boxed fallback below: its nested and dense neuron arguments are copied
// to the CPU, the op runs on ATen's NestedTensorCPU kernels, written
// arguments are copied back and results moved to the device. It counts and
// warns as the dense CPU fallback does (TORCH_NEURONX_FALLBACK). Unlike the
// dense fallback it returns views of nested inputs (unbind, select) as
// copies: writing through one does not change the nested tensor.
#include "neuron.h"

#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace torch_neuronx {

namespace {

at::Tensor moved(const at::Tensor &t, c10::Device dev) {
  return t.defined() && t.device() != dev ? t.to(dev) : t;
}

// v with every neuron tensor (in lists too) on the CPU; *dev: the first
// neuron device seen, also from a Device argument.
c10::IValue to_cpu(const c10::IValue &v, std::optional<c10::Device> *dev) {
  auto cpu = [&](const at::Tensor &t) {
    if (t.defined() && t.is_privateuseone()) {
      if (!*dev) *dev = t.device();
      return t.cpu();
    }
    return t;
  };
  if (v.isTensor()) return cpu(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor &t : v.toTensorList()) out.push_back(cpu(t));
    return out;
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor> &t : v.toOptionalTensorList())
      out.push_back(t.has_value() ? std::optional<at::Tensor>(cpu(*t)) : std::nullopt);
    return out;
  }
  if (v.isDevice() && v.toDevice().type() == kNeuron) {
    if (!*dev) *dev = v.toDevice();
    return c10::IValue(c10::Device(at::kCPU));
  }
  return v;
}

c10::IValue to_device(const c10::IValue &v, c10::Device dev) {
  if (v.isTensor()) return moved(v.toTensor(), dev);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor &t : v.toTensorList()) out.push_back(moved(t, dev));
    return out;
  }
  return v;
}

void nested_cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const c10::FunctionSchema &schema = op.schema();
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  note_fallback(name);

  const auto &args = schema.arguments();
  const size_t num_args = args.size(), base = stack->size() - num_args;
  std::vector<c10::IValue> originals(stack->begin() + base, stack->end());
  std::vector<c10::IValue> cpu_args(num_args);
  std::optional<c10::Device> dev;
  bool device_arg_cpu = false;  // a factory-like op asked for the CPU
  for (size_t i = 0; i < num_args; i++) {
    c10::IValue &v = (*stack)[base + i];
    if (v.isDevice() && v.toDevice().type() == at::kCPU) device_arg_cpu = true;
    v = cpu_args[i] = to_cpu(v, &dev);
  }
  c10::Device target = dev.value_or(c10::Device(kNeuron, current_device()));
  if (target.index() < 0) target = c10::Device(kNeuron, current_device());
  c10::DeviceGuard guard(target);
  op.callBoxed(stack);

  // Arguments the op writes: their CPU copies go back into the device tensors.
  for (size_t i = 0; i < num_args; i++)
    if (args[i].alias_info() && args[i].alias_info()->isWrite() && originals[i].isTensor() &&
        !originals[i].toTensor().is_same(cpu_args[i].toTensor()))
      originals[i].toTensor().copy_(cpu_args[i].toTensor());

  const auto &rets = schema.returns();
  const size_t rbase = stack->size() - rets.size();
  for (size_t j = 0; j < rets.size(); j++) {
    c10::IValue &r = (*stack)[rbase + j];
    const c10::AliasInfo *alias = rets[j].alias_info();
    int written = -1;
    if (alias && alias->isWrite())
      for (size_t i = 0; i < num_args; i++)
        if (args[i].alias_info() && args[i].alias_info()->beforeSets() == alias->beforeSets())
          written = static_cast<int>(i);
    if (written >= 0)
      r = originals[written];  // in-place / out=: the device tensor itself
    else if (!device_arg_cpu)
      r = to_device(r, target);
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", at::native::_to_copy_nested);
  m.impl("copy_", at::native::copy_nested_);
  m.impl("empty_like", at::native::empty_like_nested);
  m.impl("clone", at::native::clone_nested);
  m.impl("alias", at::native::alias_nested);
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_cpu_fallback>());
}

}  // namespace torch_neuronx
