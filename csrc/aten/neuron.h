// Declarations shared by the PyTorch glue translation units. The glue
// translates between ATen and the C runtime/kernels; it holds no kernel math.
#pragma once

#include "runtime.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Operators.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <unordered_map>

namespace torch_neuronx {

// Kernel launch helpers for the op layer.
tnk_dtype_t to_tnk(c10::ScalarType t, bool *ok);
// Fills a kernel view from a tensor; false if the dtype or rank is not
// supported by the kernels.
bool to_view(const at::Tensor &t, tnk_view_t *view);
// The host's view of neuron tensors, for code that runs on the CPU (the
// fallback, copies the kernels cannot do, the CPU convolution); the caller
// synchronises the streams that use them first. Where the HAL reports
// device memory as host addressable, a view is a zero-copy alias; otherwise
// each device storage is copied to a host buffer once, through the HAL, and
// write_back() copies back the ones viewed as written or found changed
// (schemas do not announce every write). Other tensors pass through.
class HostViews {
 public:
  HostViews();
  at::Tensor view(const at::Tensor &t, bool written);
  // Where view()'s tensors for t's storage start in host memory (rebuilds a
  // CPU view of them as a view of t).
  const void *host_base(const at::Tensor &t) const;
  void write_back();

 private:
  struct Staged {
    at::Tensor device;    // keeps the device storage alive
    at::Tensor host;      // its bytes on the host
    at::Tensor pristine;  // those bytes as staged
    bool written = false;
  };
  bool addressable_;
  std::unordered_map<const c10::StorageImpl *, Staged> staged_;
};
// alpha / beta as ATen's kernels read them for a tensor of dtype t: an
// integer kernel converts them to its type first (0.5 becomes 0).
inline c10::Scalar scalar_as(const c10::Scalar &v, c10::ScalarType t) {
  if (c10::isIntegralType(t, /*includeBool=*/false) && v.isFloatingPoint())
    return c10::Scalar(v.toLong());
  return v;
}

// An out= argument takes a result computed into a new tensor: resized as
// ATen resizes outputs, then written (out may be one of the inputs: the
// result is complete first).
at::Tensor &assign_result(at::Tensor &out, const at::Tensor &r);
// resize_output for a broadcasting elementwise out=. An out that is also one
// of the operands (torch.add(a, b, out=a), or an in-place op that ATen writes
// as its out= form, as logical_and_) is read as well as written, so, as in
// TensorIterator, it must already have the broadcast shape: CPU's error
// rather than a resize.
void resize_elementwise_out(at::Tensor &out, at::IntArrayRef shape,
                            std::initializer_list<const at::Tensor *> operands);
// The kernel library's format of a low-precision GEMM operand or float8
// cast (tnk.h: TNK_F32, TNK_BF16, TNK_F16, TNK_F8E4M3, TNK_F8E5M2, TNK_I8;
// -1: none of them).
int32_t lowp_format(c10::ScalarType t);
// A new output of an element-wise op over these operands, laid out as CPU's
// TensorIterator lays it out (like a transposed or channels-last input).
at::Tensor empty_elementwise(at::IntArrayRef shape, c10::ScalarType dtype, c10::Device dev,
                             std::initializer_list<const at::Tensor *> operands);

// ATen's memory-overlap rules for a kernel's written tensor, so that CPU's
// and CUDA's errors are raised here too: `out` must not have two elements in
// one memory location (checked by the kernel families' launchers), and an
// input must not partially overlap it. Returns the input to read: itself, or
// a copy where the overlap is one ATen cannot classify (it reads it as is).
// This form returns `in` itself or `holder`, which then holds the copy: no
// at::Tensor copy of `in` on the eager hot path (copying a tensor that Python
// also holds takes the GIL, released by the binding, to keep its PyObject
// alive: about a third of a one-element add's host time).
inline const at::Tensor &readable_input(const at::Tensor &out, const at::Tensor &in,
                                        at::Tensor &holder) {
  if (!in.defined() || !out.numel() || !in.numel() || in.is_same(out) ||
      !in.storage().is_alias_of(out.storage()))
    return in;
  switch (at::get_overlap_status(out, in)) {
    case at::MemOverlapStatus::Partial: at::assert_no_partial_overlap(out, in); break;
    case at::MemOverlapStatus::Full: return in;
    default: break;
  }
  if (in.const_data_ptr() == out.const_data_ptr() && in.strides() == out.strides()) return in;
  holder = in.clone();
  return holder;
}

inline at::Tensor readable_input(const at::Tensor &out, const at::Tensor &in) {
  at::Tensor holder;
  return readable_input(out, in, holder);
}

// Raises CPU's "value cannot be converted to type T without overflow" when a
// Python scalar does not fit the dtype it is written as (fill, masked_fill,
// clamp bounds, scatter values...), instead of wrapping it.
inline void check_scalar_fits(const c10::Scalar &s, c10::ScalarType t) {
  switch (t) {
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
    case at::kDouble:
    case at::kBool:
    case at::kComplexFloat:
    case at::kComplexDouble:
      AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kHalf, at::kBFloat16, at::kBool, t,
                                             "check_scalar_fits", [&] { (void)s.to<scalar_t>(); });
      break;
    default: break;
  }
}

// Where a kernel reports bad data: the current stream of device; the fault
// is raised at the next synchronisation as IndexError (index_error) or
// RuntimeError, matching the exception CPU raises for that op.
inline tnk_fault_t fault_sink(c10::DeviceIndex device, const char *what, bool index_error) {
  return {tnrt_stream_fault, current_native_stream(device), what,
          index_error ? TNRT_FAULT_INDEX : TNRT_FAULT_ASSERT, tnrt_thread_token()};
}

// Reductions: the output shape of reducing `dims` (all when none/empty), and
// the kernel descriptor for reducing self into out (op left to the caller).
std::vector<int64_t> reduced_shape(const at::Tensor &self, at::OptionalIntArrayRef dims,
                                   bool keepdim);
void fill_reduce_args(const at::Tensor &self, at::OptionalIntArrayRef dims, bool keepdim,
                      const at::Tensor &out, tnk_reduce_args_t *a);

// The CPU fallback (boxed; native kernels call it for cases they do not
// take) and op tracking.
void neuron_cpu_fallback(const c10::OperatorHandle &op, std::vector<c10::IValue> *stack);
// Counts an op that ran on the CPU, warns once, or raises in error mode.
void note_fallback(const std::string &name);
std::vector<std::pair<std::string, int64_t>> fallback_ops();
// Counting of every op that ran on neuron (native or fallback), while on.
void set_op_tracking(bool on);
bool op_tracking();
std::vector<std::pair<std::string, int64_t>> executed_ops();
// Forgets both the fallback and the executed-op counts.
void clear_op_tracking();
void set_fallback_mode(const std::string &mode);
std::string fallback_mode();

// ------------------------------------------------ helpers of the op files

inline void set_shape(tnk_shape_t *s, at::IntArrayRef sizes) {
  s->ndim = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); d++) s->sizes[d] = sizes[d];
}

// The kernel dtype of t; TNK_DTYPE_COUNT when the kernels have none.
inline tnk_dtype_t tnk_of(const at::Tensor &t) {
  bool ok;
  tnk_dtype_t d = to_tnk(t.scalar_type(), &ok);
  return ok ? d : TNK_DTYPE_COUNT;
}

// uint16/32/64: no kernel takes them (the CPU's own kernels serve them).
inline bool is_wide_unsigned(c10::ScalarType t) {
  return t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64;
}

// Whether any of the given optional tensors is defined and float32: CPU's
// mixed-type rule for normalisation statistics of half-type inputs.
inline bool any_float32(std::initializer_list<const std::optional<at::Tensor> *> ts) {
  for (const auto *p : ts)
    if (p->has_value() && (*p)->defined() && (*p)->scalar_type() == at::kFloat) return true;
  return false;
}

inline bool floating_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// t's strides broadcast to shape (0 along broadcast dims).
inline void fill_strides(const at::Tensor &t, at::IntArrayRef shape, int64_t *strides) {
  int64_t nd = shape.size(), td = t.dim();
  for (int64_t d = 0; d < nd; d++) {
    int64_t i = d - (nd - td);
    strides[d] = (i < 0 || t.size(i) == 1) ? 0 : t.stride(i);
  }
}

// Sizes of the dims before, at and after `dim` of a contiguous view.
inline void split_dims(at::IntArrayRef sizes, int64_t dim, int64_t *outer, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < dim; d++) *outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); d++) *inner *= sizes[d];
}

// Runs fn into out when out is contiguous, else into a contiguous temporary
// that is copied back (kernels write contiguous outputs).
template <typename F>
void into_contiguous(at::Tensor &out, F fn) {
  at::assert_no_internal_overlap(out);
  if (out.is_contiguous()) {
    fn(out);
  } else {
    at::Tensor tmp = out.contiguous();
    fn(tmp);
    out.copy_(tmp);
  }
}

// ---------------------------------- pooling and resampling (pooling.c, resample.c)
// Inputs are [C, (D,) H, W] or [N, C, (D,) H, W]; the kernels read and write
// NC(D)HW planes, so other layouts go through a contiguous copy, and results
// land in the layout ATen gives the input (channels-last stays channels-last).

inline bool pool_dtype_ok(const at::Tensor &t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && tnk_pool_supported(dt);
}

// A floating tensor of `spatial` spatial dims, with or without the batch dim.
inline bool spatial_ok(const at::Tensor &t, int spatial = 2) {
  return pool_dtype_ok(t) && (t.dim() == spatial + 1 || t.dim() == spatial + 2);
}

// Writes the NCHW result `r` into `out` (resized to r's shape in `fmt`).
inline at::Tensor &deliver(at::Tensor &out, const at::Tensor &r, at::MemoryFormat fmt) {
  if (out.is_same(r)) return out;
  if (at::native::resize_output(out, r.sizes()) && fmt != at::MemoryFormat::Contiguous)
    out.resize_(r.sizes(), fmt);  // a fresh output takes the input's layout
  out.copy_(r);
  return out;
}

inline at::MemoryFormat format_of(const at::Tensor &t) {
  return t.dim() >= 4 ? t.suggest_memory_format() : at::MemoryFormat::Contiguous;
}

// Result tensor of `shape` in `fmt`, and the NCHW buffer the kernel writes.
inline std::pair<at::Tensor, at::Tensor> result_pair(at::IntArrayRef shape,
                                                     const at::TensorOptions &o,
                                                     at::MemoryFormat fmt) {
  at::Tensor nchw = at::empty(shape, o);
  if (fmt == at::MemoryFormat::Contiguous) return {nchw, nchw};
  return {at::empty(shape, o.memory_format(fmt)), nchw};
}

}  // namespace torch_neuronx

// Runs ATen operator OPNAME on the CPU through the counted fallback (for the
// cases a native kernel does not take), with the operator's own arguments.
#define FALLBACK(OPNAME, ...) \
  at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(OPNAME)>::call(__VA_ARGS__)

// Registers the functional, out=, backward and backward grad_input= forms of
// an op family whose C++ functions are NAME, NAME##_out, NAME##_backward and
// NAME##_backward_out (inside a TORCH_LIBRARY_IMPL block whose library is m).
#define NEURON_REGISTER_WITH_BACKWARD(NAME)   \
  m.impl(#NAME, NAME);                        \
  m.impl(#NAME ".out", NAME##_out);           \
  m.impl(#NAME "_backward", NAME##_backward); \
  m.impl(#NAME "_backward.grad_input", NAME##_backward_out);
