// Tensors on the device: dtype and view translation for the kernels, empty
// and empty_strided, copies (device, host, pinned; the host views the CPU
// code reads through), views, storage ops (set_, record_stream), fill, the
// factories (arange, eye, linspace) and cat.
#include "neuron.h"

#include <algorithm>
#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/TensorIterator.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>

namespace torch_neuronx {

namespace {}  // namespace

tnk_dtype_t to_tnk(c10::ScalarType t, bool *ok) {
  *ok = true;
  switch (t) {
    case at::kBool: return TNK_BOOL;
    case at::kByte: return TNK_U8;
    case at::kChar: return TNK_I8;
    case at::kShort: return TNK_I16;
    case at::kInt: return TNK_I32;
    case at::kLong: return TNK_I64;
    case at::kHalf: return TNK_F16;
    case at::kBFloat16: return TNK_BF16;
    case at::kFloat: return TNK_F32;
    case at::kDouble: return TNK_F64;
    case at::kComplexFloat: return TNK_C64;
    case at::kComplexDouble: return TNK_C128;
    default: *ok = false; return TNK_U8;
  }
}

bool to_view(const at::Tensor &t, tnk_view_t *v) {
  bool ok;
  v->dtype = to_tnk(t.scalar_type(), &ok);
  if (!ok || t.dim() > TNRT_MAX_DIMS) return false;
  v->data = t.numel() ? t.data_ptr() : nullptr;
  for (int64_t d = 0; d < t.dim(); d++) v->strides[d] = t.stride(d);
  return true;
}

namespace {

void check_dtype_supported(c10::ScalarType t) {
  // complex32 (ComplexHalf) is stored like float8: copies are byte moves,
  // conversions and its few ops (as on CUDA: arithmetic, view_as_real, cat)
  // run through the CPU fallback
  TORCH_CHECK_TYPE(!c10::isQIntType(t) && !c10::isBitsType(t),
                   "neuron does not support tensors of dtype ", t,
                   ": keep such tensors on the CPU, or convert them to a "
                   "supported dtype (bool, integers, floating, complex) first");
}

c10::DeviceIndex device_of(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) return current_device();
  TORCH_CHECK(device->type() == kNeuron, "expected a neuron device, got ", *device);
  check_device_index(device->index());
  return device->index();
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> mf) {
  TORCH_CHECK(!pin_memory.value_or(false), "only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron supports only strided tensors, got layout ", *layout);
  c10::ScalarType st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  return empty_neuron(size, st, c10::Device(kNeuron, device_of(device)), mf);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron supports only strided tensors, got layout ", *layout);
  c10::ScalarType st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  check_dtype_supported(st);
  c10::DeviceGuard guard(c10::Device(kNeuron, device_of(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

// ------------------------------------------------------------------ copies

}  // namespace

at::Tensor empty_neuron(at::IntArrayRef size, c10::ScalarType dtype, c10::Device dev,
                        std::optional<c10::MemoryFormat> mf) {
  TORCH_INTERNAL_ASSERT(dev.type() == kNeuron);
  check_dtype_supported(dtype);
  c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  if (!dev.has_index() || dev.index() == current_device())
    return at::detail::empty_generic(size, device_allocator(), keys, dtype, mf);
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, device_allocator(), keys, dtype, mf);
}

HostViews::HostViews() : addressable_(tnrt_host_addressable() != 0) {}

at::Tensor HostViews::view(const at::Tensor &t, bool written) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  const c10::Storage &storage = t.storage();
  const char *base = static_cast<const char *>(storage.data());
  if (!addressable_ && storage.nbytes()) {
    auto it = staged_.find(storage.unsafeGetStorageImpl());
    if (it == staged_.end()) {
      Staged st;
      st.device = t;
      st.host =
          at::empty({static_cast<int64_t>(storage.nbytes())}, at::TensorOptions().dtype(at::kByte));
      check(tnrt_memcpy_d2h(t.device().index(), st.host.data_ptr(), base, storage.nbytes()),
            "copy device memory to the host");
      // Schemas do not mark every write (native_batch_norm updates its
      // running statistics unannounced): what changed is found by comparison.
      st.pristine = st.host.clone();
      it = staged_.emplace(storage.unsafeGetStorageImpl(), std::move(st)).first;
    }
    it->second.written = it->second.written || written;
    base = static_cast<const char *>(it->second.host.const_data_ptr());
  }
  // the host tensor keeps what backs it alive: the device storage, and the
  // staged copy (which HostViews also keeps until it is written back)
  c10::Storage keep = storage;
  at::Tensor host = addressable_ || !storage.nbytes()
                        ? at::Tensor()
                        : staged_.at(storage.unsafeGetStorageImpl()).host;
  void *data =
      t.numel() == 0 ? nullptr : const_cast<char *>(base) + t.storage_offset() * t.itemsize();
  auto out = at::from_blob(
      data, t.sizes(), t.strides(),
      [keep, host](void *) mutable {
        keep = {};
        host.reset();
      },
      t.options().device(at::kCPU));
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

const void *HostViews::host_base(const at::Tensor &t) const {
  auto it = staged_.find(t.storage().unsafeGetStorageImpl());
  return it == staged_.end() ? t.storage().data() : it->second.host.const_data_ptr();
}

void HostViews::write_back() {
  for (auto &[impl, st] : staged_) {
    if (!st.written && !std::memcmp(st.host.const_data_ptr(), st.pristine.const_data_ptr(),
                                    st.device.storage().nbytes()))
      continue;
    check(
        tnrt_memcpy_h2d(st.device.device().index(), const_cast<void *>(st.device.storage().data()),
                        st.host.const_data_ptr(), st.device.storage().nbytes()),
        "copy host memory to the device");
    st.written = false;
    st.pristine.copy_(st.host);
  }
}

at::Tensor &assign_result(at::Tensor &out, const at::Tensor &r) {
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// Its strides fall strictly from the outermost dimension in (those of size 1
// and broadcast ones aside): TensorIterator keeps such an operand's order,
// so a result over only such operands is contiguous (a slice of a row-major
// tensor, an expanded one). Decided without building the iterator, which
// costs about 1.5 us of a small op's 2-4.
static bool row_major_order(const at::Tensor &t) {
  int64_t last = std::numeric_limits<int64_t>::max();
  for (int64_t d = 0; d < t.dim(); d++) {
    if (t.size(d) == 1 || t.stride(d) == 0) continue;
    if (t.stride(d) >= last) return false;
    last = t.stride(d);
  }
  return true;
}

// The strides CPU's TensorIterator gives a new output of an element-wise op
// over these operands (its dimensions in the operands' memory order: a
// transposed or channels-last input gives a transposed or channels-last
// result); empty when that is the contiguous layout, always so when every
// operand is contiguous or in row-major order. TensorIterator itself
// computes them, over meta tensors with the operands' sizes and strides.
static std::vector<int64_t> elementwise_strides(
    std::initializer_list<const at::Tensor *> operands) {
  bool any = false;
  for (const at::Tensor *t : operands)
    if (t && t->defined() && t->dim() > 1 && !t->is_contiguous() && !row_major_order(*t))
      any = true;
  if (!any) return {};
  at::TensorIteratorConfig cfg;
  cfg.set_check_mem_overlap(false);
  cfg.add_owned_output(at::Tensor());
  for (const at::Tensor *t : operands)
    if (t && t->defined())
      cfg.add_owned_const_input(at::empty_strided(t->sizes(), t->strides(),
                                                  at::TensorOptions(at::kMeta).dtype(at::kFloat)));
  at::TensorIterator iter = cfg.build();
  const at::Tensor &o = iter.output(0);
  if (o.is_contiguous()) return {};
  return o.strides().vec();
}

at::Tensor empty_elementwise(at::IntArrayRef shape, c10::ScalarType dtype, c10::Device dev,
                             std::initializer_list<const at::Tensor *> operands) {
  std::vector<int64_t> strides = elementwise_strides(operands);
  if (strides.empty() || strides.size() != shape.size()) return empty_neuron(shape, dtype, dev);
  return at::empty_strided(shape, strides, at::TensorOptions(dev).dtype(dtype));
}

void resize_elementwise_out(at::Tensor &out, at::IntArrayRef shape,
                            std::initializer_list<const at::Tensor *> operands) {
  for (const at::Tensor *t : operands)
    TORCH_CHECK(!t || !t->defined() || !t->is_same(out) || out.sizes() == shape,
                "output with shape ", out.sizes(), " doesn't match the broadcast shape ", shape);
  if (at::native::resize_output(out, shape)) {
    // resized (it was empty or of another shape): as TensorIterator, the
    // layout a new output would have
    std::vector<int64_t> strides = elementwise_strides(operands);
    if (!strides.empty() && strides.size() == shape.size()) out.as_strided_(shape, strides);
  }
}

namespace {

bool ranges_overlap(const at::Tensor &a, const at::Tensor &b) {
  if (!a.numel() || !b.numel()) return false;
  if (!a.storage().is_alias_of(b.storage())) return false;
  auto range = [](const at::Tensor &t) {
    int64_t lo = t.storage_offset(), hi = lo;
    for (int64_t d = 0; d < t.dim(); d++) {
      int64_t span = (t.size(d) - 1) * t.stride(d);
      if (span < 0)
        lo += span;
      else
        hi += span;
    }
    return std::make_pair(lo * (int64_t)t.itemsize(), (hi + 1) * (int64_t)t.itemsize());
  };
  auto ra = range(a), rb = range(b);
  return ra.first < rb.second && rb.first < ra.second;
}

// Copies through CPU ATen on host aliases: the path for layouts and dtypes
// the copy kernel does not take (conj/neg views, >12 dims, float8 to and
// from host memory or other dtypes...).
void copy_on_host(const at::Tensor &src, const at::Tensor &dst) {
  if (src.is_privateuseone())
    check(tnrt_stream_synchronize(current_native_stream(src.device().index())),
          "stream synchronize");
  if (dst.is_privateuseone())
    check(tnrt_stream_synchronize(current_native_stream(dst.device().index())),
          "stream synchronize");
  HostViews host;
  at::Tensor d = host.view(dst, /*written=*/true);
  d.copy_(host.view(src, false));
  host.write_back();
}

tnk_dtype_t raw_dtype(const at::Tensor &t, bool *ok) {
  tnk_dtype_t dt = to_tnk(t.scalar_type(), ok);
  if (*ok) return dt;
  *ok = true;
  switch (t.itemsize()) {  // same-dtype copies are byte moves
    case 1: return TNK_U8;
    case 2: return TNK_I16;
    case 4: return TNK_I32;
    case 8: return TNK_I64;
    default: *ok = false; return TNK_U8;
  }
}

// A copy task's arguments: src's elements, as its shape and strides walk
// them, to dst_data laid out by dst_strides (one per dimension of src).
tnk_copy_args_t copy_args(void *dst_data, at::IntArrayRef dst_strides, tnk_dtype_t dst_dtype,
                          const at::Tensor &src, tnk_dtype_t src_dtype) {
  TORCH_INTERNAL_ASSERT(src.dim() <= TNRT_MAX_DIMS);
  tnk_copy_args_t a{};
  set_shape(&a.shape, src.sizes());
  a.dst.data = dst_data;
  a.dst.dtype = dst_dtype;
  a.src.data = const_cast<void *>(src.const_data_ptr());
  a.src.dtype = src_dtype;
  for (int64_t d = 0; d < src.dim(); d++) {
    a.dst.strides[d] = dst_strides[d];
    a.src.strides[d] = src.stride(d);
  }
  return a;
}

at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking) {
  TORCH_CHECK(self.is_privateuseone() || dst.is_privateuseone());
  TORCH_CHECK(self.is_privateuseone() || self.is_cpu(), "copy between neuron and ", self.device(),
              " is not supported");
  TORCH_CHECK(dst.is_privateuseone() || dst.is_cpu(), "copy between neuron and ", dst.device(),
              " is not supported");
  if (dst.numel() == 0) return dst;
  at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  if (src.is_conj() != dst.is_conj() || src.is_neg() != dst.is_neg()) {
    copy_on_host(src, dst);
    return dst;
  }
  if (dst.is_privateuseone() && src.is_privateuseone()) {
    // as CPU's copy_ (a host-to-device copy may fill an expanded tensor: the
    // CPU fallback writes results back that way)
    at::assert_no_internal_overlap(dst);
    if (ranges_overlap(src, dst)) {
      if (src.is_same(dst)) return dst;
      src = readable_input(dst, src);
      if (ranges_overlap(src, dst)) src = src.clone();  // copy in stream order
    }
  }
  if (dst.is_privateuseone() && src.is_privateuseone() && src.device() == dst.device()) {
    // casts between floats and float8 (the copy kernel's dtypes have no
    // float8): a device kernel, rounding as CPU's casts
    int32_t sf = lowp_format(src.scalar_type()), df = lowp_format(dst.scalar_type());
    if (sf >= 0 && df >= 0 && tnk_fp8_convert_supported(df, sf)) {
      at::Tensor s = src.contiguous();
      at::Tensor d = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
      tnk_fp8_convert_args_t c{d.numel(), d.data_ptr(), s.const_data_ptr(), df, sf};
      launch_kernel<TNK_K_FP8_CONVERT>(dst.device().index(), c, "aten::copy_", d.numel());
      if (!d.is_same(dst)) dst.copy_(d);
      return dst;
    }
  }
  bool ok_s, ok_d;
  tnk_dtype_t src_dt = raw_dtype(src, &ok_s), dst_dt = raw_dtype(dst, &ok_d);
  bool same = src.scalar_type() == dst.scalar_type();
  bool cast_ok;
  to_tnk(src.scalar_type(), &cast_ok);
  bool kernel_ok = ok_s && ok_d && (same || cast_ok) && dst.dim() <= TNRT_MAX_DIMS;
  if (kernel_ok && !same) to_tnk(dst.scalar_type(), &kernel_ok);
  if (!kernel_ok) {
    copy_on_host(src, dst);
    return dst;
  }
  tnk_copy_args_t a = copy_args(dst.data_ptr(), dst.strides(), dst_dt, src, src_dt);

  if (dst.is_privateuseone() && src.is_privateuseone()) {
    c10::DeviceIndex dd = dst.device().index(), sd = src.device().index();
    if (dd != sd) {  // order after the source device's current work
      tnrt_event_t *e = tnrt_event_create(TNRT_EVENT_DEFAULT);
      check(tnrt_event_record(e, current_native_stream(sd)), "event record");
      check(tnrt_stream_wait_event(current_native_stream(dd), e), "event wait");
      tnrt_event_destroy(e);
      device_allocator()->recordStream(src.storage().data_ptr(), current_stream(dd));
    }
    launch_kernel<TNK_K_COPY>(dd, a, "aten::copy_", dst.numel());
    if (dd != sd) {  // and the source device's later work after the copy
      tnrt_event_t *e = tnrt_event_create(TNRT_EVENT_DEFAULT);
      check(tnrt_event_record(e, current_native_stream(dd)), "event record");
      check(tnrt_stream_wait_event(current_native_stream(sd), e), "event wait");
      tnrt_event_destroy(e);
    }
    return dst;
  }
  const at::Tensor &host = dst.is_privateuseone() ? src : dst;
  c10::DeviceIndex dev = dst.is_privateuseone() ? dst.device().index() : src.device().index();
  tnrt_stream_t *s = current_native_stream(dev);
  const void *hp = host.storage().data();
  bool async = non_blocking && hp && tnrt_host_is_pinned(hp);
  const char *name = dst.is_privateuseone() ? "aten::copy_ (H2D)" : "aten::copy_ (D2H)";
  // a synchronous copy of a few elements (item(), a scalar to the device)
  // runs in place on an idle stream, as small kernels do
  bool small = !async && dst.numel() <= small_kernel_elems();
  kernel_provider();
  check(tnrt_launch_kernel(s, TNK_K_COPY, &a, sizeof a, name, small, nullptr), "neuron copy");
  if (async) {
    // Returns at once, as CUDA does for pinned memory; the pinned buffer
    // is kept alive until this stream passes the copy.
    check(tnrt_host_record_stream(hp, s), "record pinned buffer");
  } else {
    check(tnrt_stream_synchronize(s), "stream synchronize");
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// ------------------------------------------------------------------- views

at::Tensor as_strided(const at::Tensor &self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

// ------------------------------------------------------------ storage ops

void record_stream(at::Tensor &self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "record_stream: expected a neuron stream, got ",
              stream);
  device_allocator()->recordStream(self.storage().data_ptr(), stream);
}

const at::Tensor &resize_(const at::Tensor &self, at::IntArrayRef size,
                          std::optional<c10::MemoryFormat> mf) {
  for (int64_t s : size)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  auto *impl = self.unsafeGetTensorImpl();
  if (impl->sizes() != size) impl->set_sizes_contiguous(size);
  if (mf.has_value()) {
    TORCH_CHECK(*mf != c10::MemoryFormat::Preserve, "Unsupported memory format ", *mf);
    impl->empty_tensor_restride(*mf);
  }
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.itemsize(),
                                                   self.storage_offset());
  if (needed > self.storage().nbytes())
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(self.storage(), needed);
  return self;
}

at::Tensor &set_storage(at::Tensor &self, c10::Storage source, c10::SymInt storage_offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  int64_t off = storage_offset.expect_int();
  std::vector<int64_t> isize(C10_AS_INTARRAYREF_SLOW(size).vec());
  std::vector<int64_t> istride;
  if (stride.empty()) {  // contiguous
    istride.resize(isize.size());
    int64_t acc = 1;
    for (size_t d = isize.size(); d-- > 0;) {
      istride[d] = acc;
      acc *= std::max<int64_t>(isize[d], 1);
    }
  } else {
    istride = C10_AS_INTARRAYREF_SLOW(stride).vec();
  }
  at::native::checkSetStorage(self, std::move(source), off, at::IntArrayRef(isize),
                              at::IntArrayRef(istride));
  at::native::setStrided(self, at::IntArrayRef(isize), at::IntArrayRef(istride), off);
  return self;
}

at::Tensor &set_storage_whole(at::Tensor &self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  std::vector<c10::SymInt> size{c10::SymInt(n)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(source), 0, size, stride);
}

at::Tensor &set_tensor(at::Tensor &self, const at::Tensor &src) {
  if (self.is_same(src)) return self;
  return set_storage(self, src.storage(), src.sym_storage_offset(), src.sym_sizes(),
                     src.sym_strides());
}

at::Tensor &set_empty(at::Tensor &self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage fresh(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  std::vector<c10::SymInt> size{c10::SymInt(0)}, stride{c10::SymInt(1)};
  return set_storage(self, fresh, 0, size, stride);
}

// ------------------------------------------------------- fill and scalars

tnk_scalar_t to_scalar(const c10::Scalar &v) {
  tnk_scalar_t s{};
  if (v.isBoolean()) {
    s.is_bool = 1;
    s.i = v.toBool();
  } else if (v.isIntegral(false)) {
    s.is_integral = 1;
    s.i = v.toLong();
    s.f = static_cast<double>(s.i);
  } else if (v.isComplex()) {
    auto c = v.toComplexDouble();
    s.f = c.real();
    s.fi = c.imag();
  } else {
    s.f = v.toDouble();
  }
  return s;
}

at::Tensor &fill_scalar(at::Tensor &self, const c10::Scalar &value) {
  check_scalar_fits(value, self.scalar_type());
  if (self.numel() == 0) return self;
  tnk_fill_args_t a{};
  if (!to_view(self, &a.dst)) {  // rare dtypes or ranks: on the host
    copy_on_host(at::scalar_tensor(value, self.options().device(at::kCPU)), self);
    return self;
  }
  TORCH_CHECK(!self.is_conj() && !self.is_neg(),
              "fill_ on a conjugate or negative view is not supported; call "
              "resolve_conj() first");
  set_shape(&a.shape, self.sizes());
  a.value = to_scalar(value);
  launch_kernel<TNK_K_FILL>(self.device().index(), a, "aten::fill_", self.numel());
  return self;
}

c10::Scalar local_scalar_dense(const at::Tensor &self) {
  bool ok;
  tnk_dtype_t dt = raw_dtype(self, &ok);
  if (ok && self.numel() == 1 && !self.is_conj() && !self.is_neg() && self.itemsize() <= 16 &&
      self.dim() <= TNRT_MAX_DIMS) {
    // item(): the element copied by a small task (in place on an idle
    // stream) into a buffer here, after the stream's earlier work
    alignas(16) unsigned char buf[16];
    // (one element: every index is 0, any dst strides do)
    tnk_copy_args_t a = copy_args(buf, self.strides(), dt, self, dt);
    tnrt_stream_t *s = current_native_stream(self.device().index());
    kernel_provider();
    check(tnrt_launch_kernel(s, TNK_K_COPY, &a, sizeof a, "aten::_local_scalar_dense", 1, nullptr),
          "neuron copy");
    check(tnrt_stream_synchronize(s), "stream synchronize");
    return at::_local_scalar_dense(at::from_blob(buf, {}, self.options().device(at::kCPU)));
  }
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copy_from(self.reshape({}), host, false);
  return at::_local_scalar_dense(host);
}

at::Tensor &fill_tensor(at::Tensor &self, const at::Tensor &value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ",
              value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor &zero_(at::Tensor &self) { return fill_scalar(self, 0); }

// --------------------------------------------------------------------- cat

// CPU's error for 0-d operands (the meta kernel raises a Python IndexError).
void check_cat_ranks(const std::vector<std::reference_wrapper<const at::Tensor>> &list) {
  for (size_t i = 0; i < list.size(); i++)
    TORCH_CHECK(list[i].get().dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
}

// The output of cat computed here for the common case: every input of one
// rank and dtype, sizes equal except along dim. ATen's meta cat is a Python
// decomposition (prims::cat, about 50 us a call): it was half the host time
// of a batch-1 decode step, whose KV cache grows by cat. Anything else
// (legacy empty 1-D inputs, mixed dtypes, mismatched shapes: ATen's checks
// and messages) takes the meta path. The memory format follows ATen's rule:
// the inputs' common suggested format, else contiguous.
struct CatShape {
  std::vector<int64_t> sizes;
  c10::MemoryFormat format;
  at::ScalarType dtype;
  int64_t dim;
};

std::optional<CatShape> simple_cat_shape(
    const std::vector<std::reference_wrapper<const at::Tensor>> &list, int64_t dim) {
  // legacy empty 1-D inputs of the same dtype (a KV cache's first cat) add
  // nothing; they make the output contiguous, as in ATen
  auto legacy = [](const at::Tensor &t) { return t.dim() == 1 && t.numel() == 0; };
  auto it = std::find_if(list.begin(), list.end(), [&](const auto &t) { return !legacy(t); });
  if (it == list.end()) return std::nullopt;
  const at::Tensor &first = it->get();
  int64_t rank = first.dim();
  if (rank == 0 || dim < -rank || dim >= rank) return std::nullopt;
  int64_t d = dim < 0 ? dim + rank : dim;
  CatShape out{first.sizes().vec(), first.suggest_memory_format(), first.scalar_type(), d};
  out.sizes[d] = 0;
  for (const auto &ref : list) {
    const at::Tensor &t = ref.get();
    if (rank != 1 && legacy(t) && t.scalar_type() == out.dtype) {
      out.format = c10::MemoryFormat::Contiguous;
      continue;
    }
    if (t.dim() != rank || t.scalar_type() != out.dtype) return std::nullopt;
    for (int64_t i = 0; i < rank; i++)
      if (i != d && t.size(i) != first.size(i)) return std::nullopt;
    out.sizes[d] += t.size(d);
    if (t.suggest_memory_format() != out.format) out.format = c10::MemoryFormat::Contiguous;
  }
  return out;
}

CatShape cat_shape(const std::vector<std::reference_wrapper<const at::Tensor>> &list, int64_t dim) {
  if (auto fast = simple_cat_shape(list, dim)) return *fast;
  std::vector<at::Tensor> metas;
  for (const at::Tensor &t : list)
    metas.push_back(at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)));
  at::Tensor meta = at::cat(metas, dim);  // ATen's own checks and shape
  return {meta.sizes().vec(), meta.suggest_memory_format(), meta.scalar_type(),
          c10::maybe_wrap_dim(dim, meta.dim())};
}

// Up to three inputs of a cat copied by one launch (tnk_copy_batch): a
// decode step's KV-cache and rotary cats are one launch each, not a
// narrow, a copy_ and a launch per input.
// The inputs copied into out along d by cat tasks; false (nothing done)
// when an input needs the general copy_ (another device or dtype, a conj or
// neg view, too many dims, memory shared with out).
bool cat_by_tasks(const std::vector<std::reference_wrapper<const at::Tensor>> &list, int64_t d,
                  const at::Tensor &out) {
  if (out.dim() > TNRT_MAX_DIMS || out.is_conj() || out.is_neg()) return false;
  for (const at::Tensor &x : list) {
    if (x.numel() == 0) continue;
    if (x.dim() != out.dim() || x.scalar_type() != out.scalar_type() ||
        x.device() != out.device() || x.is_conj() || x.is_neg() || ranges_overlap(x, out))
      return false;
  }
  bool ok;
  tnk_dtype_t dt = raw_dtype(out, &ok);
  if (!ok) return false;
  char *base = static_cast<char *>(out.data_ptr());
  int64_t step = out.stride(d) * static_cast<int64_t>(out.itemsize());
  tnk_copy_batch_args_t task{};
  int64_t offset = 0, elems = 0;
  auto flush = [&] {
    if (task.n) launch_kernel<TNK_K_COPY_BATCH>(out.device().index(), task, "aten::cat", elems);
    task.n = 0;
    elems = 0;
  };
  for (const at::Tensor &x : list) {
    if (x.numel() == 0) continue;  // adds nothing along d either (out is not empty)
    task.copy[task.n++] = copy_args(base + offset * step, out.strides(), dt, x, dt);
    elems += x.numel();
    offset += x.size(d);
    if (task.n == 3) flush();
  }
  flush();
  return true;
}

at::Tensor &cat_out(const at::ITensorListRef &tensors, int64_t dim, at::Tensor &out) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  check_cat_ranks(list);
  c10::Device dev = out.device();
  for (const at::Tensor &t : list)
    TORCH_CHECK(t.device() == dev,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                dev, " and ", t.device(), "!");
  CatShape shape = cat_shape(list, dim);
  TORCH_CHECK(at::canCast(shape.dtype, out.scalar_type()),
              "torch.cat(): input types can't be cast to the desired output "
              "type ",
              out.scalar_type());
  at::native::resize_output(out, shape.sizes);
  if (out.numel() == 0) return out;
  at::assert_no_internal_overlap(out);  // as CPU's cat
  int64_t d = shape.dim;
  if (cat_by_tasks(list, d, out)) return out;
  int64_t offset = 0;
  for (const at::Tensor &t : list) {
    const at::Tensor &x = t;
    if (x.dim() == 1 && x.numel() == 0 && static_cast<int64_t>(shape.sizes.size()) != 1)
      continue;  // legacy
    int64_t n = x.size(d);
    if (n) out.narrow(d, offset, n).copy_(x);
    offset += n;
  }
  return out;
}

at::Tensor cat(const at::ITensorListRef &tensors, int64_t dim) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  check_cat_ranks(list);
  CatShape shape = cat_shape(list, dim);
  const at::Tensor &first = list.front();
  at::Tensor out = at::empty(shape.sizes, first.options().dtype(shape.dtype), shape.format);
  return cat_out(tensors, dim, out);
}

}  // namespace

namespace {

// Module.to() moves parameters with `param.data = moved` (keeping the
// Parameter objects, hence tied weights such as embeddings shared with an
// LM head) only if this says the two tensors may share a TensorImpl type.
// c10's answer lists the dense in-tree backends (CPU, CUDA, ...) but not
// PrivateUse1, which would silently untie weights on .to("neuron").
bool has_compatible_shallow_copy_type(const at::Tensor &self, const at::Tensor &from) {
  auto dense = [](const at::Tensor &t) {
    return t.layout() == at::kStrided && !t.is_quantized() && !t.is_nested() &&
           (t.is_cpu() || t.is_privateuseone());
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

namespace {
at::Tensor quantized_unsupported(at::IntArrayRef, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout>, std::optional<c10::Device>,
                                 std::optional<bool>, std::optional<c10::MemoryFormat>) {
  check_dtype_supported(dtype.value_or(at::kQInt8));
  TORCH_CHECK_TYPE(false, "neuron does not support quantized tensors");
}
}  // namespace

at::Tensor &eye_m_out(int64_t n, int64_t m, at::Tensor &out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  at::native::resize_output(out, {n, m});
  out.zero_();
  int64_t k = std::min(n, m);
  if (k > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor &eye_out(int64_t n, at::Tensor &out) { return eye_m_out(n, n, out); }

at::Tensor &linspace_out(const c10::Scalar &start, const c10::Scalar &end, int64_t steps,
                         at::Tensor &out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  double a = start.toDouble(), b = end.toDouble();
  if (c10::isIntegralType(out.scalar_type(), true)) {  // as ATen: the ends in the
    a = static_cast<double>(start.toLong());           // integer type first
    b = static_cast<double>(end.toLong());
  }
  double step = (b - a) / (steps - 1);
  // As ATen: the first half counts up from start, the second down from end.
  int64_t half = steps / 2;
  at::Tensor i = at::arange(steps, out.options().dtype(at::kDouble));
  at::Tensor up = i * step + a, down = (i - (steps - 1)) * step + b;
  at::Tensor r = at::where(i < half, up, down);
  if (c10::isIntegralType(out.scalar_type(), true)) r = r.trunc();
  return out.copy_(r);
}

// ----------------------------------------------------------------- arange

at::Tensor &arange_out(const c10::Scalar &start, const c10::Scalar &end, const c10::Scalar &step,
                       at::Tensor &out) {
  bool ok;
  tnk_dtype_t dt = to_tnk(out.scalar_type(), &ok);
  if (!ok || out.is_complex()) return FALLBACK(arange_start_out, start, end, step, out);
  // CPU's rules: an integer dtype reads the bounds and step as int64
  // (truncating), a floating one as double; the length comes from the
  // int64 values for int64 but from the double ones for the other integer
  // types (arange(0., -8.5, -4., dtype=int32) has 3 elements, int64 2).
  bool integral = c10::isIntegralType(out.scalar_type(), true);
  double xs = start.toDouble(), xe = end.toDouble(), st = step.toDouble();
  int64_t is = 0, ie = 0, ist = 0;
  if (integral) {
    is = start.toLong();
    ie = end.toLong();
    ist = step.toLong();
    TORCH_CHECK(ist != 0, "step must be nonzero");
    TORCH_CHECK((ist > 0 && ie >= is) || (ist < 0 && ie <= is),
                "upper bound and larger bound inconsistent with step sign");
  } else {
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe), "unsupported range: ", xs, " -> ", xe);
    TORCH_CHECK((st > 0 && xe >= xs) || (st < 0 && xe <= xs),
                "upper bound and larger bound inconsistent with step sign");
  }
  double size_d;
  if (out.scalar_type() == at::kLong) {
    const int64_t sgn = (ist > 0) - (ist < 0);
    size_d = static_cast<double>((ie - is + ist - sgn) / ist);
  } else {
    size_d = std::ceil((xe - xs) / st);
  }
  TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "invalid size, possible overflow?");
  int64_t n = static_cast<int64_t>(size_d);
  if (out.numel() != n) out.resize_({n});
  if (!out.is_contiguous()) return FALLBACK(arange_start_out, start, end, step, out);
  tnk_arange_args_t a{};
  a.out = n ? out.data_ptr() : nullptr;
  a.n = n;
  a.integral = integral;
  if (integral) {
    a.istart = is;
    a.istep = ist;
  }
  a.start = xs;
  a.step = st;
  a.dtype = dt;
  if (n) launch_kernel<TNK_K_ARANGE>(out.device().index(), a, "aten::arange");
  return out;
}

// channel_shuffle (ShuffleNet): ATen's composite (a view, a permute and one
// native copy), in the memory format the CPU kernel keeps (channels_last
// stays channels_last).
at::Tensor channel_shuffle(const at::Tensor &self, c10::SymInt groups) {
  at::Tensor out = at::_ops::native_channel_shuffle::call(self, groups);
  c10::MemoryFormat fmt = self.suggest_memory_format();
  return out.is_contiguous(fmt) ? out : out.contiguous(fmt);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("channel_shuffle", channel_shuffle);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("as_strided", as_strided);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("resize_", resize_);
  m.impl("record_stream", record_stream);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_storage_whole);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_", set_empty);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("linspace.out", linspace_out);
  m.impl("arange.start_out", arange_out);
}

// copy_ lets conjugate/negative views through to the backend, but the
// _copy_from it calls for an out-of-tree device would hit the math-bit
// fallbacks, which materialise with clone -> copy_ -> _copy_from again: an
// endless recursion (llama4's complex rotary embeddings crashed on it).
// _copy_from handles the bits itself (copy_on_host), so let them through.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty.memory_format", quantized_unsupported);
}

}  // namespace torch_neuronx
