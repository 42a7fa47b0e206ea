// Native neuron ops: factories, copies, views, storage ops, fill, scalar
// reads, cat and the random in-place ops. Each op validates with ATen's own
// logic, then launches a C kernel on the current stream of its device.
#include "neuron.h"

#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
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

tnk_dtype_t to_tnk(c10::ScalarType t, bool* ok) {
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

bool to_view(const at::Tensor& t, tnk_view_t* v) {
  bool ok;
  v->dtype = to_tnk(t.scalar_type(), &ok);
  if (!ok || t.dim() > TNK_MAX_DIMS) return false;
  v->data = t.numel() ? t.data_ptr() : nullptr;
  for (int64_t d = 0; d < t.dim(); d++) v->strides[d] = t.stride(d);
  return true;
}

static void set_shape(tnk_shape_t* s, at::IntArrayRef sizes) {
  s->ndim = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size(); d++) s->sizes[d] = sizes[d];
}

namespace {

void check_dtype_supported(c10::ScalarType t) {
  TORCH_CHECK_TYPE(!c10::isQIntType(t) && !c10::isBitsType(t) &&
                       t != at::kComplexHalf,
                   "neuron does not support tensors of dtype ", t,
                   ": keep such tensors on the CPU, or convert them to a "
                   "supported dtype (bool, integers, float16, bfloat16, "
                   "float32, float64, complex64/128) first");
}

c10::DeviceIndex device_of(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) return current_device();
  TORCH_CHECK(device->type() == kNeuron, "expected a neuron device, got ",
              *device);
  check_device_index(device->index());
  return device->index();
}

at::Tensor empty_memory_format(at::IntArrayRef size,
                               std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> mf) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron supports only strided tensors, got layout ", *layout);
  c10::ScalarType st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  check_dtype_supported(st);
  c10::DeviceGuard guard(c10::Device(kNeuron, device_of(device)));
  return at::detail::empty_generic(
      size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      st, mf);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "neuron supports only strided tensors, got layout ", *layout);
  c10::ScalarType st = dtype.value_or(c10::get_default_dtype_as_scalartype());
  check_dtype_supported(st);
  c10::DeviceGuard guard(c10::Device(kNeuron, device_of(device)));
  return at::detail::empty_strided_generic(
      size, stride, device_allocator(),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

// ------------------------------------------------------------------ copies

void copy_task(void* p) { tnk_copy(static_cast<tnk_copy_args_t*>(p)); }

}  // namespace

HostViews::HostViews() : addressable_(tnrt_host_addressable() != 0) {}

at::Tensor HostViews::view(const at::Tensor& t, bool written) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  const c10::Storage& storage = t.storage();
  const char* base = static_cast<const char*>(storage.data());
  if (!addressable_ && storage.nbytes()) {
    auto it = staged_.find(storage.unsafeGetStorageImpl());
    if (it == staged_.end()) {
      Staged st;
      st.device = t;
      st.host = at::empty({static_cast<int64_t>(storage.nbytes())},
                          at::TensorOptions().dtype(at::kByte));
      check(tnrt_memcpy_d2h(t.device().index(), st.host.data_ptr(), base, storage.nbytes()),
            "copy device memory to the host");
      // Schemas do not mark every write (native_batch_norm updates its
      // running statistics unannounced): what changed is found by comparison.
      st.pristine = st.host.clone();
      it = staged_.emplace(storage.unsafeGetStorageImpl(), std::move(st)).first;
    }
    it->second.written = it->second.written || written;
    base = static_cast<const char*>(it->second.host.const_data_ptr());
  }
  // the host tensor keeps what backs it alive: the device storage, and the
  // staged copy (which HostViews also keeps until it is written back)
  c10::Storage keep = storage;
  at::Tensor host = addressable_ || !storage.nbytes()
                        ? at::Tensor() : staged_.at(storage.unsafeGetStorageImpl()).host;
  void* data = t.numel() == 0 ? nullptr
                              : const_cast<char*>(base) + t.storage_offset() * t.itemsize();
  auto out = at::from_blob(
      data, t.sizes(), t.strides(), [keep, host](void*) mutable { keep = {}; host.reset(); },
      t.options().device(at::kCPU));
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

const void* HostViews::host_base(const at::Tensor& t) const {
  auto it = staged_.find(t.storage().unsafeGetStorageImpl());
  return it == staged_.end() ? t.storage().data() : it->second.host.const_data_ptr();
}

void HostViews::write_back() {
  for (auto& [impl, st] : staged_) {
    if (!st.written && !std::memcmp(st.host.const_data_ptr(), st.pristine.const_data_ptr(),
                                   st.device.storage().nbytes()))
      continue;
    check(tnrt_memcpy_h2d(st.device.device().index(),
                          const_cast<void*>(st.device.storage().data()),
                          st.host.const_data_ptr(), st.device.storage().nbytes()),
          "copy host memory to the device");
    st.written = false;
    st.pristine.copy_(st.host);
  }
}

at::Tensor& assign_result(at::Tensor& out, const at::Tensor& r) {
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

void resize_elementwise_out(at::Tensor& out, at::IntArrayRef shape,
                            std::initializer_list<const at::Tensor*> operands) {
  for (const at::Tensor* t : operands)
    TORCH_CHECK(!t || !t->defined() || !t->is_same(out) || out.sizes() == shape,
                "output with shape ", out.sizes(), " doesn't match the broadcast shape ",
                shape);
  at::native::resize_output(out, shape);
}

namespace {

bool ranges_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (!a.numel() || !b.numel()) return false;
  if (!a.storage().is_alias_of(b.storage())) return false;
  auto range = [](const at::Tensor& t) {
    int64_t lo = t.storage_offset(), hi = lo;
    for (int64_t d = 0; d < t.dim(); d++) {
      int64_t span = (t.size(d) - 1) * t.stride(d);
      if (span < 0) lo += span;
      else hi += span;
    }
    return std::make_pair(lo * (int64_t)t.itemsize(),
                          (hi + 1) * (int64_t)t.itemsize());
  };
  auto ra = range(a), rb = range(b);
  return ra.first < rb.second && rb.first < ra.second;
}

// Copies through CPU ATen on host aliases: the path for layouts and dtypes
// the copy kernel does not take (conj/neg views, >12 dims, float8...).
void copy_on_host(const at::Tensor& src, const at::Tensor& dst) {
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

tnk_dtype_t raw_dtype(const at::Tensor& t, bool* ok) {
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

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  TORCH_CHECK(self.is_privateuseone() || dst.is_privateuseone());
  TORCH_CHECK(self.is_privateuseone() || self.is_cpu(),
              "copy between neuron and ", self.device(), " is not supported");
  TORCH_CHECK(dst.is_privateuseone() || dst.is_cpu(),
              "copy between neuron and ", dst.device(), " is not supported");
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
  bool ok_s, ok_d;
  tnk_copy_args_t a{};
  a.src.dtype = raw_dtype(src, &ok_s);
  a.dst.dtype = raw_dtype(dst, &ok_d);
  bool same = src.scalar_type() == dst.scalar_type();
  bool cast_ok;
  to_tnk(src.scalar_type(), &cast_ok);
  bool kernel_ok = ok_s && ok_d && (same || cast_ok) &&
                   dst.dim() <= TNK_MAX_DIMS;
  if (kernel_ok && !same) to_tnk(dst.scalar_type(), &kernel_ok);
  if (!kernel_ok) {
    copy_on_host(src, dst);
    return dst;
  }
  set_shape(&a.shape, dst.sizes());
  a.dst.data = dst.data_ptr();
  a.src.data = const_cast<void*>(src.const_data_ptr());
  for (int64_t d = 0; d < dst.dim(); d++) {
    a.dst.strides[d] = dst.stride(d);
    a.src.strides[d] = src.stride(d);
  }

  if (dst.is_privateuseone() && src.is_privateuseone()) {
    c10::DeviceIndex dd = dst.device().index(), sd = src.device().index();
    if (dd != sd) {  // order after the source device's current work
      tnrt_event_t* e = tnrt_event_create(TNRT_EVENT_DEFAULT);
      check(tnrt_event_record(e, current_native_stream(sd)), "event record");
      check(tnrt_stream_wait_event(current_native_stream(dd), e), "event wait");
      tnrt_event_destroy(e);
      device_allocator()->recordStream(src.storage().data_ptr(),
                                       current_stream(dd));
    }
    launch(dd, copy_task, &a, sizeof a, "aten::copy_");
    if (dd != sd) {  // and the source device's later work after the copy
      tnrt_event_t* e = tnrt_event_create(TNRT_EVENT_DEFAULT);
      check(tnrt_event_record(e, current_native_stream(dd)), "event record");
      check(tnrt_stream_wait_event(current_native_stream(sd), e), "event wait");
      tnrt_event_destroy(e);
    }
    return dst;
  }
  const at::Tensor& host = dst.is_privateuseone() ? src : dst;
  c10::DeviceIndex dev = dst.is_privateuseone() ? dst.device().index()
                                                : src.device().index();
  tnrt_stream_t* s = current_native_stream(dev);
  check(tnrt_launch(s, copy_task, &a, sizeof a,
                    dst.is_privateuseone() ? "aten::copy_ (H2D)"
                                           : "aten::copy_ (D2H)"),
        "neuron copy");
  const void* hp = host.storage().data();
  if (non_blocking && hp && tnrt_host_is_pinned(hp)) {
    // Returns at once, as CUDA does for pinned memory; the pinned buffer
    // is kept alive until this stream passes the copy.
    check(tnrt_host_record_stream(hp, s), "record pinned buffer");
  } else {
    check(tnrt_stream_synchronize(s), "stream synchronize");
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// ------------------------------------------------------------------- views

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size,
                      at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

// ------------------------------------------------------------ storage ops

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron,
              "record_stream: expected a neuron stream, got ", stream);
  device_allocator()->recordStream(self.storage().data_ptr(), stream);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<c10::MemoryFormat> mf) {
  for (int64_t s : size)
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s,
                ": ", size);
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->sizes() != size) impl->set_sizes_contiguous(size);
  if (mf.has_value()) {
    TORCH_CHECK(*mf != c10::MemoryFormat::Preserve,
                "Unsupported memory format ", *mf);
    impl->empty_tensor_restride(*mf);
  }
  size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.itemsize(), self.storage_offset());
  if (needed > self.storage().nbytes())
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(self.storage(),
                                                               needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source,
                        c10::SymInt storage_offset, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
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
  at::native::checkSetStorage(self, std::move(source), off,
                              at::IntArrayRef(isize), at::IntArrayRef(istride));
  at::native::setStrided(self, at::IntArrayRef(isize), at::IntArrayRef(istride),
                         off);
  return self;
}

at::Tensor& set_storage_whole(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  std::vector<c10::SymInt> size{c10::SymInt(n)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(source), 0, size, stride);
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return self;
  return set_storage(self, src.storage(), src.sym_storage_offset(),
                     src.sym_sizes(), src.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage fresh(c10::Storage::use_byte_size_t(), 0, device_allocator(),
                     true);
  std::vector<c10::SymInt> size{c10::SymInt(0)}, stride{c10::SymInt(1)};
  return set_storage(self, fresh, 0, size, stride);
}

// ------------------------------------------------------- fill and scalars

tnk_scalar_t to_scalar(const c10::Scalar& v) {
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

void fill_task(void* p) { tnk_fill(static_cast<tnk_fill_args_t*>(p)); }

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
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
  launch(self.device().index(), fill_task, &a, sizeof a, "aten::fill_");
  return self;
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copy_from(self.reshape({}), host, false);
  return at::_local_scalar_dense(host);
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ", value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

// --------------------------------------------------------------------- cat

// CPU's error for 0-d operands (the meta kernel raises a Python IndexError).
void check_cat_ranks(const std::vector<std::reference_wrapper<const at::Tensor>>& list) {
  for (size_t i = 0; i < list.size(); i++)
    TORCH_CHECK(list[i].get().dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim,
                    at::Tensor& out) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  check_cat_ranks(list);
  c10::Device dev = out.device();
  std::vector<at::Tensor> metas;
  for (const at::Tensor& t : list) {
    TORCH_CHECK(t.device() == dev,
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ", dev, " and ", t.device(), "!");
    metas.push_back(at::empty_strided(t.sizes(), t.strides(),
                                      t.options().device(at::kMeta)));
  }
  at::Tensor meta = at::cat(metas, dim);  // ATen's own checks and shape
  TORCH_CHECK(at::canCast(meta.scalar_type(), out.scalar_type()),
              "torch.cat(): input types can't be cast to the desired output "
              "type ", out.scalar_type());
  at::native::resize_output(out, meta.sizes());
  if (out.numel() == 0) return out;
  int64_t d = c10::maybe_wrap_dim(dim, meta.dim());
  int64_t offset = 0;
  for (const at::Tensor& t : list) {
    const at::Tensor& x = t;
    if (x.dim() == 1 && x.numel() == 0 && meta.dim() != 1) continue;  // legacy
    int64_t n = x.size(d);
    if (n) out.narrow(d, offset, n).copy_(x);
    offset += n;
  }
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  check_cat_ranks(list);
  std::vector<at::Tensor> metas;
  for (const at::Tensor& t : list)
    metas.push_back(at::empty_strided(t.sizes(), t.strides(),
                                      t.options().device(at::kMeta)));
  at::Tensor meta = at::cat(metas, dim);
  const at::Tensor& first = list.front();
  at::Tensor out = at::empty_strided(meta.sizes(), meta.strides(),
                                     first.options().dtype(meta.scalar_type()));
  return cat_out(tensors, dim, out);
}

// ------------------------------------------------------------------ random

void random_task(void* p) { tnk_random(static_cast<tnk_random_args_t*>(p)); }

// A neuron generator dispatches random ops here even for CPU tensors; CPU
// and CUDA refuse a generator of another device with this message.
void check_generator_target(const at::Tensor& t) {
  TORCH_CHECK(t.is_privateuseone(),
              "Expected a 'cpu' device type for generator but found 'neuron'");
}

at::Tensor& launch_random(at::Tensor& self, tnk_random_args_t& a,
                          std::optional<at::Generator> gen,
                          const char* name) {
  check_generator_target(self);
  if (self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  TORCH_CHECK_TYPE(to_view(self, &a.dst),
                   name, ": neuron random kernels do not support dtype ",
                   self.scalar_type());
  set_shape(&a.shape, self.sizes());
  auto so = philox_next(gen, self.device().index());
  a.seed = so.first;
  a.offset = so.second;
  launch(self.device().index(), random_task, &a, sizeof a, name);
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but "
              "found from=", from, " > to=", to);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) ||
                  at::isComplexType(self.scalar_type()),
              "uniform_ only supports floating-point dtypes, got ",
              self.scalar_type());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_UNIFORM;
  a.lo = from;
  a.hi = to;
  return launch_random(self, a, gen, "aten::uniform_");
}

at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {  // as ATen: both parts, each with std / sqrt(2)
    check_generator_target(self);
    at::Tensor parts = at::view_as_real(self);
    normal_(parts, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "normal_ only supports floating-point dtypes, got ",
              self.scalar_type());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_NORMAL;
  a.lo = mean;
  a.hi = std;
  return launch_random(self, a, gen, "aten::normal_");
}

bool is_unsigned_wide(c10::ScalarType t) {
  return t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64;
}

at::Tensor& random_range(at::Tensor& self, int64_t from, uint64_t range,
                         std::optional<at::Generator> gen) {
  if (is_unsigned_wide(self.scalar_type())) {
    // No kernel dtype for these: draw in int64 (the range checks kept every
    // value inside [0, INT64_MAX]) and convert on the way in.
    check_generator_target(self);
    if (self.numel() == 0) return self;
    at::assert_no_internal_overlap(self);
    at::Tensor wide = at::empty(self.sizes(), self.options().dtype(at::kLong));
    random_range(wide, from, range, gen);
    self.copy_(wide);
    return self;
  }
  tnk_random_args_t a{};
  a.kind = TNK_RAND_INT;
  a.ilo = from;
  a.irange = range;
  return launch_random(self, a, gen, "aten::random_");
}

// Largest value random_() may produce for a dtype: floats stop where
// consecutive integers are still representable, as on CPU and CUDA.
uint64_t random_default_range(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return 2;
    case at::kHalf: return (1ull << 11) + 1;
    case at::kBFloat16: return (1ull << 8) + 1;
    case at::kFloat: return (1ull << 24) + 1;
    case at::kDouble: return (1ull << 53) + 1;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 1ull << 15;
    case at::kInt: return 1ull << 31;
    case at::kLong: return 1ull << 63;
    default:
      // CPU and CUDA have no bound-less random_ for the wide unsigned types
      TORCH_CHECK_NOT_IMPLEMENTED(false, "\"random_\" not implemented for '", t, "'");
  }
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  check_generator_target(self);
  return random_range(self, 0, random_default_range(self.scalar_type()), gen);
}

// The draws are integers converted to the float dtype; near the ends of a
// wide range that conversion rounds. As ATen, 'from' moves up and 'to' down
// to the nearest integers that round inside [from, to).
template <typename T>
int64_t float_from(int64_t from) {
  const auto up = static_cast<int64_t>(static_cast<T>(from + 1));
  if (up >= from) return from;
  int bits = 0;
  for (int64_t m = std::abs(from + 1); m >>= 1;) ++bits;
  return up + (int64_t{1} << (bits - std::numeric_limits<T>::digits + 1));
}

template <typename T>
int64_t float_to(int64_t to) {
  const auto down = static_cast<int64_t>(static_cast<T>(to - 1));
  if (down < to) return to;
  int bits = 0;
  for (int64_t m = std::abs(to - 1); m >>= 1;) ++bits;
  return down - (int64_t{1} << (bits - std::numeric_limits<T>::digits + 1));
}

// The values of an integer (or bool) dtype as int64: uint64's top is
// INT64_MAX, as far as int64 bounds reach.
void integer_bounds(c10::ScalarType t, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = std::numeric_limits<int64_t>::max();
  switch (t) {
    case at::kBool: *hi = 1; break;
    case at::kByte: *hi = 255; break;
    case at::kUInt16: *hi = 65535; break;
    case at::kUInt32: *hi = 4294967295LL; break;
    case at::kUInt64: break;
    case at::kChar: *lo = -128; *hi = 127; break;
    case at::kShort: *lo = -32768; *hi = 32767; break;
    case at::kInt: *lo = std::numeric_limits<int32_t>::min();
                   *hi = std::numeric_limits<int32_t>::max(); break;
    case at::kLong: *lo = std::numeric_limits<int64_t>::min(); break;
    default:
      TORCH_CHECK(false, "random_ handles only integral, floating-point and "
                  "boolean types, got ", t);
  }
}

// [from, to_inc] must fit the dtype: the CPU's checks and messages.
void check_random_bounds(int64_t from, int64_t to_inc, const at::Tensor& self) {
  const c10::ScalarType t = self.scalar_type();
  if (at::isFloatingType(t)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_bounds", [&] {
      const double lo = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
      const double hi = static_cast<double>(std::numeric_limits<scalar_t>::max());
      TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", self.dtype());
      TORCH_CHECK(to_inc >= lo && to_inc <= hi, "to - 1 is out of bounds for ", self.dtype());
      const int64_t exact = int64_t{1} << std::numeric_limits<scalar_t>::digits;
      for (auto [v, name] : {std::pair<int64_t, const char*>{from, "from"}, {to_inc, "to - 1"}})
        if (v < -exact || v > exact)
          TORCH_WARN(name, " is out of bounds [-(2^", std::numeric_limits<scalar_t>::digits,
                     "), 2^", std::numeric_limits<scalar_t>::digits, "]. Due to precision "
                     "limitations ", self.dtype(), " can support discrete uniform "
                     "distribution only within this range.");
    });
    return;
  }
  int64_t lo, hi;
  integer_bounds(t, &lo, &hi);
  TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", self.dtype());
  TORCH_CHECK(to_inc >= lo && to_inc <= hi, "to - 1 is out of bounds for ", self.dtype());
}

at::Tensor& random_from(at::Tensor& self, int64_t from,
                        std::optional<int64_t> to_opt,
                        std::optional<at::Generator> gen) {
  check_generator_target(self);
  const c10::ScalarType t = self.scalar_type();
  const bool fp = at::isFloatingType(t);
  int64_t to_inc = 0;
  if (to_opt.has_value()) {  // [from, to)
    int64_t to = *to_opt;
    TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but "
                "got from=", from, " >= to=", to);
    if (fp) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_from_to", [&] {
        from = float_from<scalar_t>(from);
        to = float_to<scalar_t>(to);
      });
      TORCH_CHECK(from < to, "random_ expects 'from' casted to dtype to be less "
                  "than 'to' casted to dtype, but got from=", from, " >= to=", to);
    }
    to_inc = to - 1;
  } else if (from == std::numeric_limits<int64_t>::min()) {
    // [INT64_MIN, INT64_MAX]: all 2^64 values (a range of 0 means that), for
    // the dtypes the CPU draws them for
    TORCH_CHECK_NOT_IMPLEMENTED(
        t == at::kLong || t == at::kDouble || t == at::kFloat || t == at::kBFloat16 ||
            t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt,
        "\"random_\" over the full 64-bit range not implemented for '", t, "'");
    TORCH_CHECK(t == at::kLong || t == at::kDouble || t == at::kFloat || t == at::kBFloat16,
                "random_ over the full 64-bit range handles only int64, double, "
                "float and bfloat16");
    return self.numel() == 0 ? self : random_range(self, from, 0, gen);
  } else if (fp) {  // [from, 2^digits]
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_from", [&] {
      to_inc = int64_t{1} << std::min(std::numeric_limits<scalar_t>::digits, 62);
      from = float_from<scalar_t>(from);
    });
    TORCH_CHECK(from < to_inc, "random_ expects 'from' casted to dtype to be less "
                "than or equal to 'to_inc' casted to dtype, but got from=", from,
                " > to_inc=", to_inc);
  } else {  // [from, the dtype's max]
    int64_t lo;
    integer_bounds(t, &lo, &to_inc);
    if (t == at::kUInt64) to_inc = -1;  // 2^64 - 1 as int64: the CPU refuses it
  }
  check_random_bounds(from, to_inc, self);
  if (self.numel() == 0) return self;
  const uint64_t range = static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1;
  return random_range(self, from, range, gen);
}

at::Tensor& random_to(at::Tensor& self, int64_t to,
                      std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}

at::Tensor& bernoulli_float(at::Tensor& self, double p,
                            std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but "
              "got p=", p);
  tnk_random_args_t a{};
  a.kind = TNK_RAND_BERNOULLI;
  a.lo = p;
  return launch_random(self, a, gen, "aten::bernoulli_");
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p_,
                             std::optional<at::Generator> gen) {
  at::Tensor p = p_.to(self.device()).expand(self.sizes());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_BERNOULLI;
  a.has_prob = 1;
  TORCH_CHECK_TYPE(to_view(p, &a.prob),
                   "bernoulli_: unsupported probability dtype ",
                   p.scalar_type());
  check_generator_target(self);
  // a probability outside [0, 1] is found by the kernel (CPU's message)
  a.fault = {tnrt_stream_fault, current_native_stream(self.device().index()),
             "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
             TNK_FAULT_MESSAGE, tnrt_thread_token()};
  return launch_random(self, a, gen, "aten::bernoulli_");
}

at::Tensor& exponential_(at::Tensor& self, double lambd,
                         std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "exponential_ not implemented for '", self.scalar_type(), "'");
  tnk_random_args_t a{};
  a.kind = TNK_RAND_EXPONENTIAL;
  a.lo = lambd;
  return launch_random(self, a, gen, "aten::exponential_");
}

// ------------------------------------------------------------ device asserts

void assert_task(void* p) { tnk_assert(static_cast<tnk_assert_args_t*>(p)); }

// Messages outlive the ops that raise them (the fault keeps a pointer).
const char* intern(c10::string_view msg) {
  static std::mutex mu;
  static std::set<std::string> strings;
  std::lock_guard<std::mutex> lock(mu);
  return strings.emplace(msg).first->c_str();
}

}  // namespace

// Raises msg (RuntimeError) at the next synchronisation covering this point
// of the stream when the one-element tensor cond is zero: CUDA's
// _assert_async, without a host round trip.
void assert_async(const at::Tensor& cond, c10::string_view msg) {
  TORCH_CHECK(cond.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(cond.numel() == 1,
              "Boolean value of Tensor with more than one value is ambiguous");
  at::Tensor flag = cond.to(at::kBool).reshape({});
  tnk_assert_args_t a{};
  a.flag = flag.const_data_ptr();
  a.fault = {tnrt_stream_fault, current_native_stream(flag.device().index()),
             intern(msg), TNK_FAULT_MESSAGE, tnrt_thread_token()};
  launch(flag.device().index(), assert_task, &a, sizeof a, "aten::_assert_async");
}

namespace {

void assert_async_plain(const at::Tensor& cond) {
  assert_async(cond, "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_msg(const at::Tensor& cond, c10::string_view msg) {
  assert_async(cond, msg);
}

// torch.multinomial as ATen computes it, from native kernels: without
// replacement (or one sample) the exponential race argmax/topk(p / q),
// q ~ Exp(1); with replacement inverse-CDF sampling. The data checks are
// device-side asserts, as CUDA's.
at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& result) {
  TORCH_CHECK(result.device() == self.device(),
              "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong,
              "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (1 << 24), "number of categories cannot exceed 2^24");
  check_generator_target(self);
  if (self.dim() == 1) result.resize_({n_sample});
  else result.resize_({self.size(0), n_sample});
  if (result.numel() == 0) return result;
  at::Tensor p = self.dim() == 1 ? self.unsqueeze(0) : self;
  if (p.scalar_type() != at::kDouble) p = p.to(at::kFloat);
  assert_async(at::logical_and(p.max() < INFINITY, p.min() >= 0),
               "probability tensor contains either `inf`, `nan` or element < 0");
  assert_async(at::all(p.sum(-1) > 0),
               "invalid multinomial distribution (sum of probabilities <= 0)");
  at::Tensor out = result.dim() == 1 ? result.unsqueeze(0) : result;
  if (!replacement || n_sample == 1) {
    at::Tensor q = at::empty_like(p);
    exponential_(q, 1.0, gen);
    at::Tensor score = p / q;
    if (n_sample == 1) out.copy_(score.argmax(-1, true));
    else out.copy_(std::get<1>(score.topk(n_sample, -1)));
    return result;
  }
  at::Tensor cdf = p.cumsum(-1);
  cdf = cdf / cdf.narrow(-1, cats - 1, 1);
  at::Tensor u = at::empty({p.size(0), n_sample}, p.options());
  uniform_(u, 0.0, 1.0, gen);
  // category = #{cdf <= u}: in chunks of samples that bound the comparison
  int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, p.size(0) * cats));
  for (int64_t s = 0; s < n_sample; s += chunk) {
    int64_t k = std::min(chunk, n_sample - s);
    at::Tensor le = cdf.unsqueeze(1) <= u.narrow(1, s, k).unsqueeze(-1);
    out.narrow(1, s, k).copy_(le.sum(-1).clamp_max(cats - 1));
  }
  return result;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n_sample, replacement, gen, result);
}

void randperm_task(void* p) { tnk_randperm(static_cast<tnk_randperm_args_t*>(p)); }

// randperm on the device: n values, each dtype checked as ATen does (a
// float type must represent every integer up to n exactly).
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  check_generator_target(out);
  TORCH_CHECK(!out.is_complex() && out.scalar_type() != at::kBool,
              "randperm is not implemented for ", out.scalar_type());
  auto limit = [&]() -> double {
    switch (out.scalar_type()) {
      case at::kHalf: return (1 << 11) + 1;
      case at::kBFloat16: return (1 << 8) + 1;
      case at::kFloat: return (1 << 24) + 1;
      case at::kDouble: return 9007199254740993.0;  // 2^53 + 1
      default: return static_cast<double>(std::numeric_limits<int64_t>::max());
    }
  }();
  if (at::isFloatingType(out.scalar_type()))
    TORCH_CHECK(static_cast<double>(n) <= limit, "n cannot be greater than ",
                static_cast<int64_t>(limit), " for ", out.scalar_type(), " type.");
  if (!at::isFloatingType(out.scalar_type())) {
    int64_t top = std::numeric_limits<int64_t>::max();
    const char* type = "int64_t";
    switch (out.scalar_type()) {
      case at::kByte: top = 255, type = "uint8_t"; break;
      case at::kChar: top = 127, type = "int8_t"; break;
      case at::kShort: top = 32767, type = "int16_t"; break;
      case at::kInt: top = std::numeric_limits<int32_t>::max(), type = "int32_t"; break;
      default: break;
    }
    TORCH_CHECK(n == 0 || n - 1 <= top, "value cannot be converted to type ", type,
                " without overflow");
  }
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  at::Tensor dst = out.is_contiguous() ? out : at::empty({n}, out.options());
  at::Tensor scratch = dst.scalar_type() == at::kLong
                           ? dst
                           : at::empty({n}, out.options().dtype(at::kLong));
  tnk_randperm_args_t a{};
  a.dst = dst.data_ptr();
  a.scratch = scratch.data_ptr<int64_t>();
  a.n = n;
  bool ok;
  a.dtype = to_tnk(dst.scalar_type(), &ok);
  TORCH_CHECK_TYPE(ok, "randperm: unsupported dtype ", dst.scalar_type());
  auto so = philox_next(gen, out.device().index());
  a.seed = so.first;
  a.offset = so.second;
  launch(out.device().index(), randperm_task, &a, sizeof a, "aten::randperm");
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

// Module.to() moves parameters with `param.data = moved` (keeping the
// Parameter objects, hence tied weights such as embeddings shared with an
// LM head) only if this says the two tensors may share a TensorImpl type.
// c10's answer lists the dense in-tree backends (CPU, CUDA, ...) but not
// PrivateUse1, which would silently untie weights on .to("neuron").
bool has_compatible_shallow_copy_type(const at::Tensor& self,
                                      const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() &&
           !t.is_nested() && (t.is_cpu() || t.is_privateuseone());
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
      from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
  m.impl("randperm.generator_out", randperm_out);
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("random_", random_);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("exponential_", exponential_);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
  m.impl("_assert_async", assert_async_plain);
  m.impl("_assert_async.msg", assert_async_msg);
}

namespace {
at::Tensor quantized_unsupported(at::IntArrayRef, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout>, std::optional<c10::Device>,
                                 std::optional<bool>, std::optional<c10::MemoryFormat>) {
  check_dtype_supported(dtype.value_or(at::kQInt8));
  TORCH_CHECK_TYPE(false, "neuron does not support quantized tensors");
}
}  // namespace

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
