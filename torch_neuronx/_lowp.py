"""Low-precision routes into neuron's native kernels, installed when the
module that holds the route is imported (torch_neuronx._compile's
after-import hooks), each as small as the code it hooks allows:

- torch's ``out_dtype`` operator (int8 mm with int32 output, what TorchAO's
  dynamic int8 quantization calls) lowers to ``torch._int_mm`` only for
  CUDA and XPU tensors (``is_int_mm`` hard-codes the list); neuron is added
  to it. Upstream change: docs/upstream/int-mm-devices.md.
- TorchAO's int8 weight-only linear (``Int8Tensor`` with no activation
  quantization, one scale per output row) multiplies by
  ``weight.qdata.t().to(dtype)``: a bf16 copy of the whole weight on every
  call. On neuron it calls ``torch._weight_int8pack_mm`` instead, which
  streams the int8 weight once (torchao's CPU int8 path does the same with
  its own packed layout). Other devices and other Int8Tensor forms keep
  torchao's code.
- TorchAO's int4 weight-only linear for CPU (``Int4OpaqueTensor``, packed
  by ``torch._convert_weight_to_int4pack_for_cpu``) asserts that the input
  is on CPU, though all it runs is ``_weight_int4pack_mm_for_cpu``, which
  neuron has natively in CPU's packed format. The weight is quantized on
  CPU (torchao's ``from_hp`` requires it) and moved with the model; on
  neuron the linear runs the same op (the same code, without the device
  assertion). The DA8W4 form and other devices keep torchao's code.
  Upstream change: docs/upstream/torchao-int4-devices.md.
"""

import functools

import torch


def _on_neuron(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def route_int_mm(module) -> None:
    """torch._higher_order_ops.out_dtype: int8 x int8 -> int32 mm on neuron
    runs torch._int_mm (else it is an int32 mm of widened copies)."""
    original = module.is_int_mm
    if getattr(original, "_neuron_route", False):
        return

    @functools.wraps(original)
    def is_int_mm(op, output_dtype, args):
        if original(op, output_dtype, args):
            return True
        return (
            op is torch.ops.aten.mm.default
            and output_dtype == torch.int32
            and len(args) == 2
            and all(_on_neuron(a) and a.dtype == torch.int8 for a in args)
        )

    is_int_mm._neuron_route = True
    module.is_int_mm = is_int_mm


def _weight_only_rowwise(weight, x) -> bool:
    return (
        _on_neuron(x)
        and x.dtype in (torch.bfloat16, torch.float16, torch.float32)
        and getattr(weight, "act_quant_kwargs", None) is None
        and getattr(weight, "act_pre_scale", None) is None
        and weight.qdata.dim() == 2
        and weight.qdata.dtype == torch.int8
        and tuple(weight.block_size)[-1] == weight.qdata.shape[-1]
        and weight.scale.numel() == weight.qdata.shape[0]
    )


def _route_linear(cls, applies, run) -> None:
    """cls's F.linear and aten.linear table entries (TorchAO's tensor
    subclass dispatch) call run(x, weight, bias) where applies(weight, x),
    and TorchAO's own function otherwise; installed once."""
    tables = [
        (getattr(cls, "_ATEN_OP_TABLE", {}).get(cls), torch.ops.aten.linear.default),
        (getattr(cls, "_TORCH_FN_TABLE", {}).get(cls), torch.nn.functional.linear),
    ]
    for table, key in tables:
        if table is None or key not in table or getattr(table[key], "_neuron_route", False):
            continue

        def linear(func, types, args, kwargs, _original=table[key]):
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else (kwargs or {}).get("bias")
            if not (isinstance(weight, cls) and applies(weight, x)):
                return _original(func, types, args, kwargs)
            return run(x, weight, bias)

        linear._neuron_route = True
        table[key] = linear


def route_int8_weight_only(module) -> None:
    """torchao Int8Tensor: F.linear / aten.linear with an int8 weight-only
    weight (per-row scales) on neuron runs torch._weight_int8pack_mm."""

    def run(x, weight, bias):
        n, k = weight.qdata.shape
        y = torch._weight_int8pack_mm(
            x.reshape(-1, k), weight.qdata, weight.scale.reshape(n).to(x.dtype)
        ).reshape(*x.shape[:-1], n)
        return y if bias is None else y + bias

    _route_linear(module.Int8Tensor, lambda weight, x: _weight_only_rowwise(weight, x), run)


def _int4_weight_only(weight, x) -> bool:
    return (
        _on_neuron(x)
        and getattr(weight, "act_mapping_type", None) is None
        and tuple(weight.block_size)[0] == 1
    )


def route_int4_weight_only(module) -> None:
    """torchao Int4OpaqueTensor: F.linear / aten.linear with a weight-only
    (A16W4) int4 weight on neuron runs torch's _weight_int4pack_mm_for_cpu
    on neuron (TorchAO's own sequence, without its CPU assertion)."""

    def run(x, weight, bias):
        dtype = x.dtype
        if weight.act_pre_scale is not None:
            x = x * weight.act_pre_scale
        k, n = x.shape[-1], weight.shape[-2]
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.reshape(-1, k).contiguous(), weight.qdata, weight.block_size[1], weight.scale_and_zero
        )
        y = y[:, :n].reshape(*x.shape[:-1], n)
        if bias is not None:
            y = y + bias
        return y.to(dtype)

    _route_linear(module.Int4OpaqueTensor, _int4_weight_only, run)
