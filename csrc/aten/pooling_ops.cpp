// Pooling (pooling.c): max pooling with indices, average and adaptive
// average pooling, adaptive max pooling, 2-D and 3-D, forward and backward.
#include "neuron.h"

#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <ATen/native/im2col_shape_check.h>
#include <torch/library.h>

namespace torch_neuronx {

// ------------------------------------------------------------- pooling
// Inputs are [C, (D,) H, W] or [N, C, (D,) H, W]; the kernels read and write
// NC(D)HW planes, so other layouts go through a contiguous copy, and results
// land in the layout ATen gives the input (channels-last stays channels-last;
// the helpers shared with resample_ops.cpp are in neuron.h).

namespace {

// Pooling geometry over the last `spatial` (2 or 3) dims; arrays are
// (depth, height, width), depth unused in 2-D.
struct PoolGeom {
  int spatial = 2;
  int64_t k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t c = 0, planes = 0;
};

// The window parameters as the int32 ATen's shape checks take.
struct PoolInts {
  int32_t k[3], s[3], p[3], d[3];
};
PoolInts as_int32(const PoolGeom &g) {
  PoolInts r;
  for (int a = 0; a < 3; a++) {
    r.k[a] = static_cast<int32_t>(g.k[a]);
    r.s[a] = static_cast<int32_t>(g.s[a]);
    r.p[a] = static_cast<int32_t>(g.p[a]);
    r.d[a] = static_cast<int32_t>(g.dil[a]);
  }
  return r;
}

// One entry per spatial dim from a list of 1 or `spatial` entries.
int64_t pick(at::IntArrayRef v, int i, int64_t dflt) {
  if (v.empty()) return dflt;
  return v.size() > static_cast<size_t>(i) ? v[i] : v[0];
}

const char *kAxes[2] = {"two", "three"};

// Reads sizes, planes and (for windowed pools) the window parameters, ATen's
// argument checks first.
PoolGeom pool_geometry(const at::Tensor &x, int spatial, at::IntArrayRef k, at::IntArrayRef st,
                       at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, const char *name) {
  const char *n = kAxes[spatial - 2];
  auto ok = [&](at::IntArrayRef v) { return v.size() == 1 || v.size() == size_t(spatial); };
  TORCH_CHECK(ok(k), name, ": kernel_size must either be a single int, or a tuple of ", n, " ints");
  TORCH_CHECK(st.empty() || ok(st), name,
              ": stride must either be omitted, a single int, or "
              "a tuple of ",
              n, " ints");
  TORCH_CHECK(ok(pad), name, ": padding must either be a single int, or a tuple of ", n, " ints");
  TORCH_CHECK(ok(dil), name, ": dilation must be either a single int, or a tuple of ", n, " ints");
  PoolGeom g;
  g.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.k[a] = pick(k, i, 1);
    g.s[a] = st.empty() ? g.k[a] : pick(st, i, 1);
    g.p[a] = pick(pad, i, 0);
    g.dil[a] = pick(dil, i, 1);
    TORCH_CHECK(g.s[a] != 0, "stride should not be zero");
  }
  TORCH_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, "Expected ", spatial + 1, "D or ",
              spatial + 2,
              "D (batch mode) tensor with optional 0 dim batch size for input, "
              "but got:",
              x.sizes());
  g.c = x.size(-spatial - 1);
  g.planes = x.dim() == spatial + 2 ? x.size(0) * g.c : g.c;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.in[a] = x.size(x.dim() - spatial + i);
    g.out[a] = at::native::pooling_output_shape<int64_t>(g.in[a], g.k[a], g.p[a], g.s[a], g.dil[a],
                                                         ceil_mode);
  }
  PoolInts w = as_int32(g);
  const int32_t *K = w.k, *S = w.s, *P = w.p, *D = w.d;
  if (spatial == 2)
    at::native::pool2d_shape_check(x, K[1], K[2], S[1], S[2], P[1], P[2], D[1], D[2], g.c, g.in[1],
                                   g.in[2], g.out[1], g.out[2], format_of(x));
  else
    at::native::pool3d_shape_check(x, g.c, K[0], K[1], K[2], S[0], S[1], S[2], P[0], P[1], P[2],
                                   D[0], D[1], D[2], g.in[0], g.in[1], g.in[2], g.out[0], g.out[1],
                                   g.out[2], name);
  return g;
}

// x's shape with the spatial dims replaced by the pooled ones.
std::vector<int64_t> pooled_shape(const at::Tensor &x, const PoolGeom &g) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end());
  for (int i = 0; i < g.spatial; i++) s[s.size() - g.spatial + i] = g.out[3 - g.spatial + i];
  return s;
}

tnk_pool_args_t pool_args(const PoolGeom &g, int kind, const at::Tensor &x) {
  tnk_pool_args_t a{};
  a.planes = g.planes;
  a.h = g.in[1];
  a.w = g.in[2];
  a.oh = g.out[1];
  a.ow = g.out[2];
  a.kh = static_cast<int32_t>(g.k[1]);
  a.kw = static_cast<int32_t>(g.k[2]);
  a.sh = static_cast<int32_t>(g.s[1]);
  a.sw = static_cast<int32_t>(g.s[2]);
  a.ph = static_cast<int32_t>(g.p[1]);
  a.pw = static_cast<int32_t>(g.p[2]);
  a.dh = static_cast<int32_t>(g.dil[1]);
  a.dw = static_cast<int32_t>(g.dil[2]);
  if (g.spatial == 3) {
    a.d = g.in[0];
    a.od = g.out[0];
    a.kd = static_cast<int32_t>(g.k[0]);
    a.sd = static_cast<int32_t>(g.s[0]);
    a.pd = static_cast<int32_t>(g.p[0]);
    a.dd = static_cast<int32_t>(g.dil[0]);
  }
  bool ok;
  a.dtype = to_tnk(x.scalar_type(), &ok);
  a.kind = kind;
  return a;
}

// ---- max pooling with indices
// Max (or adaptive max) pooling with indices into out and indices, in fmt.
void max_pool_run(const at::Tensor &self, const PoolGeom &g, int kind, at::MemoryFormat fmt,
                  at::Tensor &out, at::Tensor &indices, const char *name) {
  auto shape = pooled_shape(self, g);
  auto [res, buf] = result_pair(shape, self.options(), fmt);
  auto [ires, ibuf] = result_pair(shape, self.options().dtype(at::kLong), fmt);
  if (buf.numel()) {
    at::Tensor x = self.contiguous();
    tnk_pool_args_t a = pool_args(g, kind, self);
    a.in = x.const_data_ptr();
    a.out = buf.data_ptr();
    a.indices = ibuf.data_ptr<int64_t>();
    launch_kernel<TNK_K_POOL>(self.device().index(), a, name);
    if (!res.is_same(buf)) {
      res.copy_(buf);
      ires.copy_(ibuf);
    }
  }
  deliver(out, res, fmt);
  deliver(indices, ires, fmt);
}

void max_pool_forward(const at::Tensor &self, int spatial, at::IntArrayRef k, at::IntArrayRef st,
                      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, at::Tensor &out,
                      at::Tensor &indices, const char *name) {
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, dil, ceil_mode, name);
  max_pool_run(self, g, TNK_POOL_MAX, format_of(self), out, indices, name);
}

// The gradient of a max (or adaptive max) pool: scattered through indices;
// an index outside the input faults as `what`.
at::Tensor max_pool_backward_run(const at::Tensor &grad, const at::Tensor &self, const PoolGeom &g,
                                 const at::Tensor &indices, int kind, const char *what,
                                 const char *name) {
  at::MemoryFormat fmt = format_of(self);
  auto [res, buf] = result_pair(self.sizes(), self.options(), fmt);
  if (buf.numel()) {
    at::Tensor go = grad.contiguous(), ix = indices.contiguous();
    tnk_pool_args_t a = pool_args(g, kind, self);
    a.backward = 1;
    a.in = go.const_data_ptr();
    a.out = buf.data_ptr();
    a.indices = const_cast<int64_t *>(ix.const_data_ptr<int64_t>());
    a.fault = fault_sink(self.device().index(), what, false);
    launch_kernel<TNK_K_POOL>(self.device().index(), a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}

at::Tensor max_pool_backward(const at::Tensor &grad, const at::Tensor &self, int spatial,
                             at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,
                             at::IntArrayRef dil, bool ceil_mode, const at::Tensor &indices,
                             const char *name) {
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, dil, ceil_mode, name);
  PoolInts w = as_int32(g);
  const int32_t *K = w.k, *S = w.s, *P = w.p, *D = w.d;
  if (spatial == 2)
    at::native::max_pool2d_backward_shape_check(self, grad, indices, K[1], K[2], S[1], S[2], P[1],
                                                P[2], D[1], D[2], g.c, g.in[1], g.in[2], g.out[1],
                                                g.out[2], format_of(self));
  else
    at::native::max_pool3d_backward_shape_check(
        self, grad, indices, g.c, K[0], K[1], K[2], S[0], S[1], S[2], P[0], P[1], P[2], D[0], D[1],
        D[2], g.in[0], g.in[1], g.in[2], g.out[0], g.out[1], g.out[2], name);
  return max_pool_backward_run(grad, self, g, indices, TNK_POOL_MAX,
                               spatial == 2 ? "max_pool2d_backward" : "max_pool3d_backward", name);
}

bool max_backward_ok(const at::Tensor &grad, const at::Tensor &self, const at::Tensor &indices,
                     int spatial) {
  return pool_dtype_ok(self) && grad.scalar_type() == self.scalar_type() &&
         indices.scalar_type() == at::kLong;
}

// ---- average pooling
// Result layout of the average pools, as CPU gives it: the input's, except
// that 3-D forward results are contiguous.
at::MemoryFormat avg_format(const at::Tensor &self, int spatial, bool backward) {
  return spatial == 3 && !backward ? at::MemoryFormat::Contiguous : format_of(self);
}

void check_divisor(std::optional<int64_t> d) {
  TORCH_CHECK(!d.has_value() || *d != 0, "divisor must be not zero");
}

// The average-pool forward or backward (grad defined) into a new tensor.
at::Tensor avg_pool_run(const at::Tensor &self, const at::Tensor *grad, int spatial,
                        at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad, bool ceil_mode,
                        bool count_include_pad, std::optional<int64_t> divisor, const char *name) {
  check_divisor(divisor);
  PoolGeom g = pool_geometry(self, spatial, k, st, pad, at::IntArrayRef{1}, ceil_mode, name);
  at::MemoryFormat fmt = avg_format(self, spatial, grad != nullptr);
  if (grad) {
    PoolInts w = as_int32(g);
    const int32_t *K = w.k, *S = w.s, *P = w.p;
    if (spatial == 2)
      at::native::avg_pool2d_backward_shape_check(self, *grad, self.dim() == 4 ? self.size(0) : 1,
                                                  K[1], K[2], S[1], S[2], P[1], P[2], g.c, g.in[1],
                                                  g.in[2], g.out[1], g.out[2], fmt);
    else
      at::native::avg_pool3d_backward_shape_check(self, *grad, g.c, K[0], K[1], K[2], S[0], S[1],
                                                  S[2], P[0], P[1], P[2], g.in[0], g.in[1], g.in[2],
                                                  g.out[0], g.out[1], g.out[2], name);
  }
  auto [res, buf] =
      result_pair(grad ? self.sizes().vec() : pooled_shape(self, g), self.options(), fmt);
  if (buf.numel()) {
    at::Tensor in = grad ? grad->contiguous() : self.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_AVG, self);
    a.backward = grad != nullptr;
    a.count_include_pad = count_include_pad;
    a.divisor = divisor.value_or(0);
    a.in = in.const_data_ptr();
    a.out = buf.data_ptr();
    launch_kernel<TNK_K_POOL>(self.device().index(), a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}

// ---- adaptive pooling: windows [floor(o*in/out), ceil((o+1)*in/out)), ATen's
// argument checks first.
PoolGeom adaptive_geometry(const at::Tensor &self, int spatial, at::IntArrayRef osize,
                           const char *name) {
  TORCH_CHECK(self.dim() == spatial + 1 || self.dim() == spatial + 2, name, "(): Expected ",
              spatial + 1, "D or ", spatial + 2, "D tensor, but got ", self.sizes());
  TORCH_CHECK(osize.size() == static_cast<size_t>(spatial), name, ": output_size must be ",
              spatial);
  for (int64_t i = 1; i < self.dim(); i++)
    TORCH_CHECK(self.size(i) > 0, name,
                "(): Expected input to have non-zero size for non-batch "
                "dimensions, but input has sizes ",
                self.sizes(), " with dimension ", i, " being empty");
  for (int64_t o : osize)
    TORCH_CHECK(o >= 0, name,
                ": elements of output_size must be greater than or equal to 0 "
                "but received ",
                osize);
  PoolGeom g;
  g.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    int a = 3 - spatial + i;
    g.in[a] = self.size(self.dim() - spatial + i);
    g.out[a] = osize[i];
    g.k[a] = g.out[a] ? (g.in[a] + g.out[a] - 1) / g.out[a] + 1 : 1;  // for the work split
  }
  g.c = self.size(-spatial - 1);
  g.planes = self.dim() == spatial + 2 ? self.size(0) * g.c : g.c;
  return g;
}

// ---- adaptive average pooling
at::Tensor adaptive_avg_run(const at::Tensor &self, const at::Tensor *grad, int spatial,
                            at::IntArrayRef osize, const char *name) {
  PoolGeom g = adaptive_geometry(self, spatial, osize, name);
  at::MemoryFormat fmt = avg_format(self, spatial, grad != nullptr);
  auto [res, buf] =
      result_pair(grad ? self.sizes().vec() : pooled_shape(self, g), self.options(), fmt);
  if (buf.numel()) {
    at::Tensor in = grad ? grad->contiguous() : self.contiguous();
    tnk_pool_args_t a = pool_args(g, TNK_POOL_ADAPTIVE_AVG, self);
    a.backward = grad != nullptr;
    a.in = in.const_data_ptr();
    a.out = buf.data_ptr();
    launch_kernel<TNK_K_POOL>(self.device().index(), a, name);
    if (!res.is_same(buf)) res.copy_(buf);
  }
  return res;
}

// ---- adaptive max pooling: max with indices over the adaptive windows; the
// backward is max pooling's (it scatters through the indices).
at::MemoryFormat adaptive_max_format(const at::Tensor &self, int spatial) {
  return spatial == 3 ? at::MemoryFormat::Contiguous : format_of(self);
}

void adaptive_max_forward(const at::Tensor &self, int spatial, at::IntArrayRef osize,
                          at::Tensor &out, at::Tensor &indices, const char *name) {
  PoolGeom g = adaptive_geometry(self, spatial, osize, name);
  max_pool_run(self, g, TNK_POOL_ADAPTIVE_MAX, adaptive_max_format(self, spatial), out, indices,
               name);
}

at::Tensor adaptive_max_backward(const at::Tensor &grad, const at::Tensor &self,
                                 const at::Tensor &indices, int spatial, const char *name) {
  TORCH_CHECK(grad.dim() == self.dim() && indices.sizes() == grad.sizes(), name,
              "(): gradient, indices and input ranks differ: ", grad.sizes(), ", ", indices.sizes(),
              " and ", self.sizes());
  std::vector<int64_t> o(grad.sizes().end() - spatial, grad.sizes().end());
  PoolGeom g = adaptive_geometry(self, spatial, o, name);
  return max_pool_backward_run(grad, self, g, indices, TNK_POOL_ADAPTIVE_MAX, name, name);
}
}  // namespace

// The 2-D and 3-D entry points: ATen's schemas, the CPU fallback for what
// the kernels do not take (integer dtypes, mixed dtypes).

#define NEURON_MAX_POOL(ND, SP)                                                                \
  std::tuple<at::Tensor &, at::Tensor &> max_pool##ND##_with_indices_out(                      \
      const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,      \
      at::IntArrayRef dil, bool ceil_mode, at::Tensor &out, at::Tensor &indices) {             \
    if (!pool_dtype_ok(self))                                                                  \
      return FALLBACK(max_pool##ND##_with_indices_out, self, k, st, pad, dil, ceil_mode, out,  \
                      indices);                                                                \
    max_pool_forward(self, SP, k, st, pad, dil, ceil_mode, out, indices,                       \
                     "aten::max_pool" #ND "_with_indices");                                    \
    return {out, indices};                                                                     \
  }                                                                                            \
  std::tuple<at::Tensor, at::Tensor> max_pool##ND##_with_indices(                              \
      const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,      \
      at::IntArrayRef dil, bool ceil_mode) {                                                   \
    at::Tensor out = at::empty({0}, self.options());                                           \
    at::Tensor idx = at::empty({0}, self.options().dtype(at::kLong));                          \
    max_pool##ND##_with_indices_out(self, k, st, pad, dil, ceil_mode, out, idx);               \
    return {out, idx};                                                                         \
  }                                                                                            \
  at::Tensor &max_pool##ND##_with_indices_backward_out(                                        \
      const at::Tensor &grad, const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st,   \
      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, const at::Tensor &indices,     \
      at::Tensor &gin) {                                                                       \
    if (!max_backward_ok(grad, self, indices, SP))                                             \
      return FALLBACK(max_pool##ND##_with_indices_backward_grad_input, grad, self, k, st, pad, \
                      dil, ceil_mode, indices, gin);                                           \
    return deliver(gin,                                                                        \
                   max_pool_backward(grad, self, SP, k, st, pad, dil, ceil_mode, indices,      \
                                     "aten::max_pool" #ND "_with_indices_backward"),           \
                   format_of(self));                                                           \
  }                                                                                            \
  at::Tensor max_pool##ND##_with_indices_backward(                                             \
      const at::Tensor &grad, const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st,   \
      at::IntArrayRef pad, at::IntArrayRef dil, bool ceil_mode, const at::Tensor &indices) {   \
    if (!max_backward_ok(grad, self, indices, SP))                                             \
      return FALLBACK(max_pool##ND##_with_indices_backward, grad, self, k, st, pad, dil,       \
                      ceil_mode, indices);                                                     \
    return max_pool_backward(grad, self, SP, k, st, pad, dil, ceil_mode, indices,              \
                             "aten::max_pool" #ND "_with_indices_backward");                   \
  }

#define NEURON_AVG_POOL(ND, SP)                                                                   \
  at::Tensor avg_pool##ND(const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st,          \
                          at::IntArrayRef pad, bool ceil_mode, bool cip,                          \
                          std::optional<int64_t> divisor) {                                       \
    if (!pool_dtype_ok(self))                                                                     \
      return FALLBACK(avg_pool##ND, self, k, st, pad, ceil_mode, cip, divisor);                   \
    return avg_pool_run(self, nullptr, SP, k, st, pad, ceil_mode, cip, divisor,                   \
                        "aten::avg_pool" #ND);                                                    \
  }                                                                                               \
  at::Tensor &avg_pool##ND##_out(const at::Tensor &self, at::IntArrayRef k, at::IntArrayRef st,   \
                                 at::IntArrayRef pad, bool ceil_mode, bool cip,                   \
                                 std::optional<int64_t> divisor, at::Tensor &out) {               \
    if (!pool_dtype_ok(self) || out.scalar_type() != self.scalar_type())                          \
      return FALLBACK(avg_pool##ND##_out, self, k, st, pad, ceil_mode, cip, divisor, out);        \
    return deliver(out,                                                                           \
                   avg_pool_run(self, nullptr, SP, k, st, pad, ceil_mode, cip, divisor,           \
                                "aten::avg_pool" #ND),                                            \
                   avg_format(self, SP, false));                                                  \
  }                                                                                               \
  at::Tensor avg_pool##ND##_backward(const at::Tensor &grad, const at::Tensor &self,              \
                                     at::IntArrayRef k, at::IntArrayRef st, at::IntArrayRef pad,  \
                                     bool ceil_mode, bool cip, std::optional<int64_t> divisor) {  \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                         \
      return FALLBACK(avg_pool##ND##_backward, grad, self, k, st, pad, ceil_mode, cip, divisor);  \
    return avg_pool_run(self, &grad, SP, k, st, pad, ceil_mode, cip, divisor,                     \
                        "aten::avg_pool" #ND "_backward");                                        \
  }                                                                                               \
  at::Tensor &avg_pool##ND##_backward_out(const at::Tensor &grad, const at::Tensor &self,         \
                                          at::IntArrayRef k, at::IntArrayRef st,                  \
                                          at::IntArrayRef pad, bool ceil_mode, bool cip,          \
                                          std::optional<int64_t> divisor, at::Tensor &gin) {      \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                         \
      return FALLBACK(avg_pool##ND##_backward_grad_input, grad, self, k, st, pad, ceil_mode, cip, \
                      divisor, gin);                                                              \
    return deliver(gin,                                                                           \
                   avg_pool_run(self, &grad, SP, k, st, pad, ceil_mode, cip, divisor,             \
                                "aten::avg_pool" #ND "_backward"),                                \
                   format_of(self));                                                              \
  }

#define NEURON_ADAPTIVE_AVG(ND, SP)                                                             \
  at::Tensor adaptive_avg_pool##ND(const at::Tensor &self, c10::SymIntArrayRef size) {          \
    TORCH_CHECK(size.size() == SP, "adaptive_avg_pool" #ND ": output_size must be " #SP);       \
    TORCH_CHECK(self.dim() == SP + 1 || self.dim() == SP + 2,                                   \
                "adaptive_avg_pool" #ND "(): Expected ", SP + 1, "D or ", SP + 2,               \
                "D tensor, but got ", self.sizes());                                            \
    if (!pool_dtype_ok(self))                                                                   \
      return at::native::call_fallback_fn_symint<&neuron_cpu_fallback,                          \
                                                 ATEN_OP(_adaptive_avg_pool##ND)>::call(self,   \
                                                                                        size);  \
    std::vector<int64_t> o;                                                                     \
    for (const auto &v : size) o.push_back(v.expect_int());                                     \
    return adaptive_avg_run(self, nullptr, SP, o, "aten::_adaptive_avg_pool" #ND);              \
  }                                                                                             \
  at::Tensor adaptive_avg_pool##ND##_backward(const at::Tensor &grad, const at::Tensor &self) { \
    if (!pool_dtype_ok(self) || grad.scalar_type() != self.scalar_type())                       \
      return FALLBACK(_adaptive_avg_pool##ND##_backward, grad, self);                           \
    TORCH_CHECK(grad.dim() == self.dim() && grad.dim() >= SP,                                   \
                "adaptive_avg_pool" #ND "_backward(): gradient and input ranks differ: ",       \
                grad.sizes(), " vs ", self.sizes());                                            \
    std::vector<int64_t> o(grad.sizes().end() - SP, grad.sizes().end());                        \
    return adaptive_avg_run(self, &grad, SP, o, "aten::_adaptive_avg_pool" #ND "_backward");    \
  }

#define NEURON_ADAPTIVE_MAX(ND, SP)                                                                \
  std::tuple<at::Tensor &, at::Tensor &> adaptive_max_pool##ND##_out(                              \
      const at::Tensor &self, at::IntArrayRef size, at::Tensor &out, at::Tensor &indices) {        \
    if (!pool_dtype_ok(self) || out.scalar_type() != self.scalar_type())                           \
      return FALLBACK(adaptive_max_pool##ND##_out, self, size, out, indices);                      \
    TORCH_CHECK(indices.scalar_type() == at::kLong,                                                \
                "adaptive_max_pool" #ND "(): Expected indices to have dtype Long, but got ",       \
                indices.scalar_type());                                                            \
    adaptive_max_forward(self, SP, size, out, indices, "adaptive_max_pool" #ND);                   \
    return {out, indices};                                                                         \
  }                                                                                                \
  at::Tensor &adaptive_max_pool##ND##_backward_out(const at::Tensor &grad, const at::Tensor &self, \
                                                   const at::Tensor &indices, at::Tensor &gin) {   \
    if (!max_backward_ok(grad, self, indices, SP))                                                 \
      return FALLBACK(adaptive_max_pool##ND##_backward_grad_input, grad, self, indices, gin);      \
    return deliver(                                                                                \
        gin, adaptive_max_backward(grad, self, indices, SP, "adaptive_max_pool" #ND "_backward"),  \
        format_of(self));                                                                          \
  }

NEURON_ADAPTIVE_MAX(2d, 2)
NEURON_ADAPTIVE_MAX(3d, 3)
NEURON_MAX_POOL(2d, 2)
NEURON_MAX_POOL(3d, 3)
NEURON_AVG_POOL(2d, 2)
NEURON_AVG_POOL(3d, 3)
NEURON_ADAPTIVE_AVG(2d, 2)
NEURON_ADAPTIVE_AVG(3d, 3)

// ------------------------------------------------------------ max_unpool2d
// The inverse of max_pool2d with indices: zeros of output_size per plane,
// each input value written at its index in the plane (a native scatter; a
// repeated index keeps one of the values, as on CPU). Its backward is
// autograd's gather over the same indices.
at::Tensor max_unpool2d(const at::Tensor &self, const at::Tensor &indices,
                        c10::SymIntArrayRef output_size_sym) {
  at::IntArrayRef output_size = C10_AS_INTARRAYREF_SLOW(output_size_sym);
  TORCH_CHECK(indices.scalar_type() == at::kLong,
              "elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in ",
              "output_size, but got ", output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with ",
              self.dim(), " dimensions.");
  TORCH_CHECK(self.sizes() == indices.sizes(),
              "Expected shape of indices to be same as that of the input tensor (", self.sizes(),
              ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0,
                "max_unpooling2d(): Expected input to have non-zero size for non-batch "
                "dimensions, but got ",
                self.sizes(), " with dimension ", i, " being empty.");
  std::vector<int64_t> osize(self.sizes().begin(), self.sizes().end() - 2);
  int64_t planes = 1;
  for (int64_t d : osize) planes *= d;
  osize.push_back(output_size[0]);
  osize.push_back(output_size[1]);
  at::Tensor out = at::zeros(osize, self.options());
  if (self.numel() == 0) return out;
  out.view({planes, output_size[0] * output_size[1]})
      .scatter_(1, indices.reshape({planes, -1}), self.reshape({planes, -1}));
  return out;
}

at::Tensor &max_unpool2d_out(const at::Tensor &self, const at::Tensor &indices,
                             c10::SymIntArrayRef output_size, at::Tensor &out) {
  at::Tensor r = max_unpool2d(self, indices, output_size);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_unpool2d", max_unpool2d);
  m.impl("max_unpool2d.out", max_unpool2d_out);
#define REGISTER_POOLS(ND)                                                               \
  m.impl("max_pool" #ND "_with_indices", max_pool##ND##_with_indices);                   \
  m.impl("max_pool" #ND "_with_indices.out", max_pool##ND##_with_indices_out);           \
  m.impl("max_pool" #ND "_with_indices_backward", max_pool##ND##_with_indices_backward); \
  m.impl("max_pool" #ND "_with_indices_backward.grad_input",                             \
         max_pool##ND##_with_indices_backward_out);                                      \
  m.impl("avg_pool" #ND, avg_pool##ND);                                                  \
  m.impl("avg_pool" #ND ".out", avg_pool##ND##_out);                                     \
  m.impl("avg_pool" #ND "_backward", avg_pool##ND##_backward);                           \
  m.impl("avg_pool" #ND "_backward.grad_input", avg_pool##ND##_backward_out);            \
  m.impl("_adaptive_avg_pool" #ND, adaptive_avg_pool##ND);                               \
  m.impl("_adaptive_avg_pool" #ND "_backward", adaptive_avg_pool##ND##_backward);        \
  m.impl("adaptive_max_pool" #ND ".out", adaptive_max_pool##ND##_out);                   \
  m.impl("adaptive_max_pool" #ND "_backward.grad_input", adaptive_max_pool##ND##_backward_out);
  REGISTER_POOLS(2d)
  REGISTER_POOLS(3d)
#undef REGISTER_POOLS
}

}  // namespace torch_neuronx
