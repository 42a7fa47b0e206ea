// Nested tensors (torch.nested, strided layout) on neuron.
//
// PyTorch gives PrivateUse1 devices nested-tensor fast paths without kernels:
// nn.TransformerEncoder in eval mode with a src_key_padding_mask packs the
// batch into a nested tensor on the input's device (transformer.py lists the
// PrivateUse1 device beside cpu and cuda) and runs every layer on it. A
// nested tensor is a dense buffer on the device with per-entry sizes, strides
// and offsets held in CPU tensors. Most of ATen's nested kernels only edit
// that metadata and call ATen ops on the buffer or on per-entry views of it,
// so they run on any device: they are registered here as they are for CUDA,
// and their work lands on neuron's own dense kernels. Among them are the
// views (unbind, select, view, transpose, unsqueeze, squeeze, narrow, chunk,
// split, values, detach): they share the device buffer, so writing through
// one changes the nested tensor, as on CPU.
//
// Left to the boxed fallback below are the few kernels that reach the buffer
// from the host (the sum over the last dimension and its backward loop over
// data_ptr; layer_norm and _transform_bias_rescale_qkv call CPU kernel stubs)
// and those built on them (the fused transformer layer and multi-head
// attention): their nested and dense neuron arguments are copied to the CPU,
// the op runs on ATen's NestedTensorCPU kernels, written arguments are copied
// back and results moved to the device. None of them returns a view. The
// fallback counts and warns as the dense CPU fallback does
// (TORCH_NEURONX_FALLBACK).
#include "neuron.h"

#include <ATen/ops/_nested_from_padded_and_nested_example_native.h>
#include <ATen/ops/_nested_from_padded_native.h>
#include <ATen/ops/_nested_select_backward_native.h>
#include <ATen/ops/_nested_tensor_size_native.h>
#include <ATen/ops/_nested_tensor_softmax_with_shape_native.h>
#include <ATen/ops/_nested_tensor_storage_offsets_native.h>
#include <ATen/ops/_nested_tensor_strides_native.h>
#include <ATen/ops/_nested_view_from_buffer_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/all_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/cat_native.h>
#include <ATen/ops/chunk_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/embedding_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/gelu_backward_native.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/is_same_size_native.h>
#include <ATen/ops/isinf_native.h>
#include <ATen/ops/isnan_native.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isposinf_native.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/linear_backward_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/matmul_native.h>
#include <ATen/ops/matmul_backward_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/narrow_native.h>
#include <ATen/ops/native_dropout_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/ones_like_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/sgn_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/split_with_sizes_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/to_padded_tensor_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unbind_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/where_native.h>
#include <ATen/ops/zero_native.h>
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
  using at::Tensor;
  namespace n = at::native;
  // copies and factories
  m.impl("_to_copy", n::_to_copy_nested);
  m.impl("copy_", n::copy_nested_);
  m.impl("empty_like", n::empty_like_nested);
  m.impl("ones_like", n::ones_like);
  m.impl("clone", n::clone_nested);
  m.impl("fill_.Scalar", static_cast<Tensor &(*)(Tensor &, const at::Scalar &)>(n::fill_nested_));
  m.impl("fill_.Tensor", static_cast<Tensor &(*)(Tensor &, const Tensor &)>(n::fill_nested_));
  m.impl("zero_", n::zero_nested_);
  m.impl("normal_", n::normal_nested_);
  m.impl("cat", n::cat_nested);
  m.impl("to_padded_tensor", n::NestedTensor_to_padded_tensor_generic);
  m.impl("_nested_from_padded_and_nested_example", n::NestedTensor_from_padded_and_nested_example);
  // metadata
  m.impl("_nested_tensor_size", n::_nested_tensor_size);
  m.impl("_nested_tensor_strides", n::_nested_tensor_strides);
  m.impl("_nested_tensor_storage_offsets", n::_nested_tensor_storage_offsets);
  m.impl("is_same_size", n::nested_is_same_size);
  // views of the device buffer
  m.impl("alias", n::alias_nested);
  m.impl("detach", n::detach);
  m.impl("values", n::values_nested);
  m.impl("unbind.int", n::NestedTensor_unbind);
  m.impl("select.int", n::select_nested);
  m.impl("transpose.int", n::transpose_nested);
  m.impl("unsqueeze", n::unsqueeze_nested);
  m.impl("squeeze", n::squeeze_nested);
  m.impl("squeeze.dim", static_cast<Tensor (*)(const Tensor &, int64_t)>(n::squeeze_dim_nested));
  m.impl("squeeze.dims",
         static_cast<Tensor (*)(const Tensor &, at::IntArrayRef)>(n::squeeze_dim_nested));
  m.impl("view", n::view_nested);
  m.impl("narrow", n::narrow_nested_symint);
  m.impl("chunk", n::chunk_nested_tensor);
  m.impl("split_with_sizes", n::split_with_sizes_nested);
  // element-wise, on the buffer
  m.impl("add.Tensor", n::NestedTensor_add_Tensor);
  m.impl("add_.Tensor", n::NestedTensor_add__Tensor);
  m.impl("sub.Tensor", n::NestedTensor_sub_Tensor);
  m.impl("mul.Tensor", n::NestedTensor_mul_Tensor);
  m.impl("mul_.Tensor", n::NestedTensor_mul__Tensor);
  m.impl("mul.Scalar", n::NestedTensor_mul_Scalar);
  m.impl("mul_.Scalar", n::NestedTensor_mul__Scalar);
  m.impl("div.Tensor", n::NestedTensor_div_Tensor);
  m.impl("div.Scalar", n::NestedTensor_div_Scalar);
  m.impl("eq.Scalar", n::eq_scalar_nested);
  m.impl("eq.Tensor", n::eq_tensor_nested);
  m.impl("ge.Scalar", n::ge_scalar_nested);
  m.impl("gt.Scalar", n::gt_scalar_nested);
  m.impl("masked_fill.Scalar", n::NestedTensor_masked_fill);
  m.impl("where.self", n::NestedTensor_where);
  m.impl("where.self_out", n::NestedTensor_where_out);
  m.impl("abs", n::NestedTensor_abs);
  m.impl("abs_", n::NestedTensor_abs_);
  m.impl("neg", n::NestedTensor_neg);
  m.impl("neg_", n::NestedTensor_neg_);
  m.impl("sgn", n::NestedTensor_sgn);
  m.impl("sgn_", n::NestedTensor_sgn_);
  m.impl("relu", n::NestedTensor_relu);
  m.impl("relu_", n::NestedTensor_relu_);
  m.impl("gelu", n::NestedTensor_gelu);
  m.impl("gelu_", n::NestedTensor_gelu_);
  m.impl("silu", n::NestedTensor_silu);
  m.impl("silu_", n::NestedTensor_silu_);
  m.impl("tanh", n::NestedTensor_tanh);
  m.impl("tanh_", n::NestedTensor_tanh_);
  m.impl("logical_not", n::NestedTensor_logical_not);
  m.impl("logical_not_", n::NestedTensor_logical_not_);
  m.impl("sqrt", n::NestedTensor_sqrt);
  m.impl("sin", n::NestedTensor_sin);
  m.impl("cos", n::NestedTensor_cos);
  m.impl("isnan", n::NestedTensor_isnan);
  m.impl("isinf", n::NestedTensor_isinf);
  m.impl("isposinf", n::NestedTensor_isposinf);
  m.impl("isneginf", n::NestedTensor_isneginf);
  m.impl("native_dropout", n::native_dropout_nested);
  // per-entry reductions and products
  m.impl("all.dim", n::NestedTensor_all);
  m.impl("_softmax", n::softmax_nested);
  m.impl("_nested_tensor_softmax_with_shape", n::NestedTensor_softmax_dropout);
  m.impl("bmm", n::bmm_nested);
  m.impl("matmul", n::matmul_nested);
  m.impl("matmul.out", n::matmul_out_nested);
  m.impl("linear", n::nested_linear);
  m.impl("embedding", n::NestedTensor_embedding);
  // backward
  m.impl("_softmax_backward_data", n::nested_softmax_backward);
  m.impl("_nested_select_backward", n::_nested_select_backward_symint);
  m.impl("linear_backward", n::nested_linear_backward);
  m.impl("matmul_backward", n::matmul_backward_nested);
  m.impl("threshold_backward", n::threshold_backwards_nested);
  m.impl("gelu_backward", n::gelu_backwards_nested);
  m.impl("silu_backward", n::silu_backward_nested);
}

// Dense device tensors to nested ones: a padded tensor back to a nested one
// (to_padded_tensor's backward), and a nested view of a dense buffer
// (torch.nested.as_nested_tensor of a tensor, torch.load of a nested tensor;
// its sizes, strides and offsets are CPU tensors, as for every nested tensor).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_from_padded", at::native::nested_from_padded_generic);
  m.impl("_nested_view_from_buffer", at::native::_nested_view_from_buffer);
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_cpu_fallback>());
}

}  // namespace torch_neuronx
