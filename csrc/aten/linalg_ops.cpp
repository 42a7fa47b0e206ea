// Linear algebra: GEMM (mm, addmm, bmm, baddbmm, addbmm, addr), vector
// products (dot, vdot, addmv), triangular solve (trsm.c) and the FFT as DFT
// matrix products.
#include "neuron.h"

#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace torch_neuronx {

// linalg.solve_triangular: A X = B (left) by substitution on the device;
// X A = B is the transposed problem A^T X^T = B^T. The result has the
// layout of ATen's (and of its meta function, which compiled graphs check):
// batches of column-major (F-contiguous) matrices.
namespace {

// Solves A x = x in place: x [..., n, k] holds B, its batch dimensions
// collapse to one (it was made here); A broadcasts to x's batch.
void solve_in_place(const at::Tensor &A, const at::Tensor &x, bool upper, bool unit) {
  int64_t n = x.size(-2), k = x.size(-1);
  std::vector<int64_t> as(x.sizes().begin(), x.sizes().end() - 2);
  as.insert(as.end(), {n, n});
  at::Tensor a = A.expand(as).reshape({-1, n, n});
  at::Tensor x3 = x.view({-1, n, k});
  tnk_trsm_args_t t{};
  t.batch = x3.size(0);
  t.n = n;
  t.k = k;
  t.a = a.const_data_ptr();
  t.x = x3.data_ptr();
  t.sa_b = a.stride(0);
  t.sa_r = a.stride(1);
  t.sa_c = a.stride(2);
  t.sx_b = x3.stride(0);
  t.sx_r = x3.stride(1);
  t.sx_c = x3.stride(2);
  t.dtype = A.scalar_type() == at::kDouble ? TNK_F64 : TNK_F32;
  t.upper = upper;
  t.unit = unit;
  launch_kernel<TNK_K_TRSM>(A.device().index(), t, "aten::linalg_solve_triangular");
}

// x resized to shape as batches of column-major matrices.
void resize_f_contiguous(at::Tensor &x, std::vector<int64_t> shape) {
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  x.resize_(shape);
  x.transpose_(-2, -1);
}
}  // namespace

at::Tensor &linalg_solve_triangular_out(const at::Tensor &A, const at::Tensor &B, bool upper,
                                        bool left, bool unit, at::Tensor &out) {
  auto t = A.scalar_type();
  if ((t != at::kFloat && t != at::kDouble) || B.scalar_type() != t || out.scalar_type() != t ||
      B.device() != A.device())
    return FALLBACK(linalg_solve_triangular_out, A, B, upper, left, unit, out);
  TORCH_CHECK(A.dim() >= 2,
              "linalg.solve_triangular: The input tensor A must have at least 2 "
              "dimensions.");
  TORCH_CHECK(B.dim() >= 2,
              "linalg.solve_triangular: The input tensor B must have at least 2 "
              "dimensions.");
  TORCH_CHECK(A.size(-1) == A.size(-2),
              "linalg.solve_triangular: A must be batches of square "
              "matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
  int64_t n = A.size(-1), side = left ? B.size(-2) : B.size(-1);
  TORCH_CHECK(side == n, "Incompatible shapes of A and B for the equation ",
              left ? "AX = B (" : "XA = B (", A.size(-2), "x", n, " and ", B.size(-2), "x",
              B.size(-1), ")");
  auto shape = at::infer_size(A.sizes().slice(0, A.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  shape.push_back(B.size(-2));
  shape.push_back(B.size(-1));
  bool fresh = at::native::resize_output_check(out, shape);
  at::Tensor x = out;  // a fresh out is solved in place
  if (fresh) {
    resize_f_contiguous(out, shape);
  } else {
    x = at::empty({0}, out.options());
    resize_f_contiguous(x, shape);
  }
  if (x.numel() == 0) return out;  // empty systems (backward of cholesky, qr...)
  x.copy_(B.expand(shape));
  if (left)  // x is not empty, so neither is A (x's batch and one side are A's)
    solve_in_place(A, x, upper, unit);
  else
    solve_in_place(A.mT(), x.mT(), !upper, unit);
  if (!fresh) out.copy_(x);
  return out;
}

at::Tensor linalg_solve_triangular(const at::Tensor &A, const at::Tensor &B, bool upper, bool left,
                                   bool unit) {
  at::Tensor out = at::empty({0}, A.options());
  if (A.scalar_type() != B.scalar_type() ||
      (A.scalar_type() != at::kFloat && A.scalar_type() != at::kDouble))
    return FALLBACK(linalg_solve_triangular, A, B, upper, left, unit);
  return linalg_solve_triangular_out(A, B, upper, left, unit, out);
}

// ------------------------------------------------------------------ GEMM

namespace {

bool gemm_dtype_ok(const at::Tensor &t) {
  bool ok;
  tnk_dtype_t dt = to_tnk(t.scalar_type(), &ok);
  return ok && kernel_supported(TNK_K_GEMM, kernel_query(-1, dt, -1, -1));
}

// Products the GEMM kernel has no dtype for, from native kernels: complex as
// four real GEMMs of the parts, integers as sums of broadcast products in
// int64 (exact; wrapping to the dtype afterwards agrees with CPU's wrapping
// arithmetic), in chunks of k that bound the temporary.
bool other_product_ok(const at::Tensor &t) {
  auto st = t.scalar_type();
  return st == at::kComplexFloat || st == at::kComplexDouble ||
         (c10::isIntegralType(st, false) && st != at::kBool);
}

at::Tensor product3(const at::Tensor &a, const at::Tensor &b) {  // [B,M,K] @ [B,K,N]
  if (a.is_complex()) {
    at::Tensor ar = at::view_as_real(a.resolve_conj()), br = at::view_as_real(b.resolve_conj());
    at::Tensor are = ar.select(-1, 0), aim = ar.select(-1, 1);
    at::Tensor bre = br.select(-1, 0), bim = br.select(-1, 1);
    at::Tensor re = at::bmm(are, bre) - at::bmm(aim, bim);
    at::Tensor im = at::bmm(are, bim) + at::bmm(aim, bre);
    return at::complex(re, im);
  }
  int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  at::Tensor a64 = a.to(at::kLong), b64 = b.to(at::kLong);
  at::Tensor acc = at::zeros({B, M, N}, a64.options());
  int64_t per_k = std::max<int64_t>(1, B * M * N);
  int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / per_k);
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    int64_t kc = std::min(chunk, K - k0);
    acc.add_((a64.narrow(2, k0, kc).unsqueeze(-1) * b64.narrow(1, k0, kc).unsqueeze(1)).sum(2));
  }
  return acc.to(a.scalar_type());
}

// beta * self + alpha * product, with self ignored when beta is 0 (as CPU:
// NaN or inf in it do not propagate)
at::Tensor scaled_sum(const at::Tensor &self, const at::Tensor &prod, const c10::Scalar &beta_,
                      const c10::Scalar &alpha_) {
  const c10::Scalar beta = scalar_as(beta_, prod.scalar_type());
  const c10::Scalar alpha = scalar_as(alpha_, prod.scalar_type());
  at::Tensor r = prod * alpha;
  if (beta.toComplexDouble() == 0.0) return r;
  return r + self * beta;
}

void check_same_device(const at::Tensor &a, const at::Tensor &b, const char *op) {
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              a.device(), " and ", b.device(), "! (when checking argument for ", op, ")");
}

// out[b] = beta * out[b] + alpha * a[b] @ m[b]; 3-D views (batch first), or
// 2-D matrices as a batch of one (no unsqueezed views to make: a small mm's
// host path is what batch-1 decoding pays).
void launch_gemm(const at::Tensor &out, const at::Tensor &a, const at::Tensor &b, double alpha,
                 double beta, const char *name) {
  at::assert_no_internal_overlap(out);
  // batch, row and column stride of a 2-D or 3-D operand
  auto strides = [](const at::Tensor &t, int64_t *sb, int64_t *sr, int64_t *sc) {
    int64_t d = t.dim() - 2;
    *sb = d ? t.stride(0) : 0;
    *sr = t.stride(d);
    *sc = t.stride(d + 1);
  };
  tnk_gemm_args_t g{};
  int64_t d = out.dim() - 2;
  g.batch = d ? out.size(0) : 1;
  g.m = out.size(d);
  g.n = out.size(d + 1);
  g.k = a.size(a.dim() - 1);
  g.c = out.data_ptr();
  g.a = a.const_data_ptr();
  g.b = b.const_data_ptr();
  strides(a, &g.sa_b, &g.sa_r, &g.sa_c);
  strides(b, &g.sb_b, &g.sb_r, &g.sb_c);
  strides(out, &g.sc_b, &g.sc_r, &g.sc_c);
  bool ok;
  g.dtype = to_tnk(out.scalar_type(), &ok);
  g.alpha = alpha;
  g.beta = beta;
  // a packing buffer the kernel cannot allocate: RuntimeError at the next sync
  g.fault = fault_sink(out.device().index(), name, false);
  if (out.numel() == 0) return;
  if (g.k == 0 && beta == 0.0) {  // empty sum: zeros, whatever C held
    out.zero_();
    return;
  }
  launch_kernel<TNK_K_GEMM>(out.device().index(), g, name);
}

void check_mm(const at::Tensor &a, const at::Tensor &b, const char *op) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(),
              " != ", b.scalar_type());
  check_same_device(a, b, op);
}

}  // namespace

namespace {
// The batch shapes of bmm and baddbmm, with ATen's messages.
void check_bmm(const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ",
              a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
}

// out = beta * self (broadcast to shape) + alpha * a @ b for matrices or
// 3-D (batch first) stacks a and b; through a temporary when out aliases an
// operand.
void accumulate_product(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                        at::IntArrayRef shape, const c10::Scalar &beta, const c10::Scalar &alpha,
                        at::Tensor &out, const char *name) {
  double bv = beta.toDouble();
  bool in_place = out.is_same(self);
  at::native::resize_output(out, shape);
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty(shape, out.options());
  if (bv != 0.0 && !(in_place && o.is_same(out))) o.copy_(self.expand(shape));
  launch_gemm(o, a, b, alpha.toDouble(), bv, name);
  if (!o.is_same(out)) out.copy_(o);
}
}  // namespace

at::Tensor &mm_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {
  check_mm(a, b, "mm");
  check_same_device(a, out, "mm");
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), "Expected out tensor to have dtype ",
              a.scalar_type(), ", but got ", out.scalar_type(), " instead");
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type()) {
    at::Tensor r = product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
    return assign_result(out, r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(mm_out)>::call(a, b, out);
  at::native::resize_output(out, {a.size(0), b.size(1)});
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty_like(out);  // GEMM cannot write over its inputs
  launch_gemm(o, a, b, 1.0, 0.0, "aten::mm");
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

at::Tensor mm(const at::Tensor &a, const at::Tensor &b) {
  check_mm(a, b, "mm");
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type())
    return product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(mm)>::call(a, b);
  at::Tensor out = empty_neuron({a.size(0), b.size(1)}, a.scalar_type(), a.device());
  launch_gemm(out, a, b, 1.0, 0.0, "aten::mm");
  return out;
}

// addr as outer_sum: ATen's composite formula (beta 0 ignores self), with the CPU's
// scalar checks; fp16/bf16 are computed in fp32 and rounded once.
at::Tensor outer_sum(const at::Tensor &self, const at::Tensor &v1, const at::Tensor &v2,
                     const c10::Scalar &beta, const c10::Scalar &alpha) {
  const at::ScalarType t =
      c10::promoteTypes(c10::promoteTypes(self.scalar_type(), v1.scalar_type()), v2.scalar_type());
  for (auto [v, name] :
       {std::pair<const c10::Scalar *, const char *>{&beta, "beta"}, {&alpha, "alpha"}}) {
    TORCH_CHECK(!v->isBoolean() || t == at::kBool, "Boolean ", name,
                " only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t) || v->isIntegral(true),
                "For integral input tensors, argument ", name,
                " must not be a floating point number.");
  }
  if (at::isReducedFloatingType(t))
    return at::native::math_addr(self.to(at::kFloat), v1.to(at::kFloat), v2.to(at::kFloat), beta,
                                 alpha)
        .to(t);
  return at::native::math_addr(self, v1, v2, beta, alpha);
}

at::Tensor &addr_out(const at::Tensor &self, const at::Tensor &v1, const at::Tensor &v2,
                     const c10::Scalar &beta, const c10::Scalar &alpha, at::Tensor &out) {
  at::Tensor r = outer_sum(self, v1, v2, beta, alpha);
  return assign_result(out, r);
}

// addr_: ATen's composite form expands self, so it would accept (and
// resize) any self that broadcasts; CPU's and CUDA's in-place kernel writes
// self itself, which must be the 2-D outer-product shape.
at::Tensor &addr_(at::Tensor &self, const at::Tensor &v1, const at::Tensor &v2,
                  const c10::Scalar &beta, const c10::Scalar &alpha) {
  at::Tensor r = outer_sum(self, v1, v2, beta, alpha);  // checks the vectors
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.sizes() == r.sizes(), "size mismatch, input: ", self.sizes(),
              ", v1: ", v1.sizes(), ", v2: ", v2.sizes());
  return self.copy_(r);
}

at::Tensor &addmm_out(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                      const c10::Scalar &beta, const c10::Scalar &alpha, at::Tensor &out) {
  check_mm(a, b, "addmm");
  check_same_device(self, a, "addmm");
  TORCH_CHECK(self.scalar_type() == a.scalar_type() && out.scalar_type() == a.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ",
              a.scalar_type());
  std::vector<int64_t> shape{a.size(0), b.size(1)};
  if (!gemm_dtype_ok(a) && other_product_ok(a) && b.scalar_type() == a.scalar_type()) {
    at::expand_size(self, shape, "addmm");
    at::Tensor r =
        scaled_sum(self, product3(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0), beta, alpha);
    at::native::resize_output(out, shape);
    return out.copy_(r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(addmm_out)>::call(
        self, a, b, beta, alpha, out);
  at::expand_size(self, shape, "addmm");  // checks that self broadcasts
  accumulate_product(self, a, b, shape, beta, alpha, out, "aten::addmm");
  return out;
}

at::Tensor addmm(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                 const c10::Scalar &beta, const c10::Scalar &alpha) {
  check_mm(a, b, "addmm");
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  return addmm_out(self, a, b, beta, alpha, out);
}

at::Tensor &addmm_(at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                   const c10::Scalar &beta, const c10::Scalar &alpha) {
  TORCH_CHECK(self.dim() == 2 && self.size(0) == a.size(0) && self.size(1) == b.size(1),
              "addmm_: self must have the shape of the product, got ", self.sizes());
  return addmm_out(self, a, b, beta, alpha, self);
}

// addmm then relu or (exact) gelu in place: the feed-forward of the
// TransformerEncoderLayer fast path
at::Tensor &addmm_activation_out(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                                 const c10::Scalar &beta, const c10::Scalar &alpha, bool use_gelu,
                                 at::Tensor &out) {
  addmm_out(self, a, b, beta, alpha, out);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

at::Tensor addmm_activation(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                            const c10::Scalar &beta, const c10::Scalar &alpha, bool use_gelu) {
  check_mm(a, b, "addmm");
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  return addmm_activation_out(self, a, b, beta, alpha, use_gelu, out);
}

at::Tensor &bmm_out(const at::Tensor &a, const at::Tensor &b, at::Tensor &out) {
  check_bmm(a, b);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected scalar type ", a.scalar_type(),
              " but found ", b.scalar_type());
  check_same_device(a, b, "bmm");
  if (!gemm_dtype_ok(a) && other_product_ok(a)) {
    at::Tensor r = product3(a, b);
    return assign_result(out, r);
  }
  if (!gemm_dtype_ok(a))
    return at::native::call_fallback_fn<&neuron_cpu_fallback, ATEN_OP(bmm_out)>::call(a, b, out);
  at::native::resize_output(out, {a.size(0), a.size(1), b.size(2)});
  at::Tensor o = out;
  if (o.storage().is_alias_of(a.storage()) || o.storage().is_alias_of(b.storage()))
    o = at::empty_like(out);
  launch_gemm(o, a, b, 1.0, 0.0, "aten::bmm");
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

at::Tensor bmm(const at::Tensor &a, const at::Tensor &b) {
  at::Tensor out = at::empty({0}, a.options());
  return bmm_out(a, b, out);
}

// torch._grouped_mm: one launch for every group (kernels/grouped_gemm.c),
// with the offsets read by the kernel (no host synchronisation). The four
// forms of PyTorch's op: 2-D x 3-D (rows of A grouped), 3-D x 2-D (columns
// of B grouped), 2-D x 2-D (the shared dimension grouped, a [G, M, N]
// result: the weight gradient), 3-D x 3-D (a batched product). Bad offsets
// (decreasing, past the end) are a RuntimeError at the next synchronisation,
// like a device-side assert; rows or columns no group covers are zero (CPU
// leaves them uninitialised). A bias or another output dtype: CPU's errors.
at::Tensor grouped_mm(const at::Tensor &a, const at::Tensor &b,
                      const std::optional<at::Tensor> &offs, const std::optional<at::Tensor> &bias,
                      std::optional<c10::ScalarType> out_dtype) {
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3,
              "Multiplicands must be 2D or 3D but got mat_a.dim()=", a.dim(),
              " and mat_b.dim()=", b.dim());
  TORCH_CHECK(b.dim() == 2 || b.dim() == 3,
              "Multiplicands must be 2D or 3D but got mat_a.dim()=", a.dim(),
              " and mat_b.dim()=", b.dim());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected mat_a and mat_b of one dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  check_same_device(a, b, "_grouped_mm");
  bool a2 = a.dim() == 2, b2 = b.dim() == 2;
  bool has_offs = offs.has_value() && offs->defined();
  TORCH_CHECK(has_offs == (a2 || b2), a2 || b2
                                          ? "_grouped_mm: offs are required when an operand is 2-D"
                                          : "_grouped_mm: offs must not be given for 3-D x 3-D");
  if (!(a2 && b2))
    TORCH_CHECK(a.size(-1) == b.size(-2), "contraction dimension of mat_a and mat_b must match");
  // as CPU's
  TORCH_CHECK(!bias.has_value() || !bias->defined(), "Bias not supported yet");
  TORCH_CHECK(!out_dtype.has_value() || *out_dtype == a.scalar_type(),
              "Grouped gemm output dtype must match `mat_a` dtype");
  auto st = a.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf,
              "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got ", st);
  tnk_grouped_gemm_args_t g{};
  at::Tensor out, o;
  if (has_offs) {
    TORCH_CHECK(offs->scalar_type() == at::kInt, "Offsets have to be int32");
    TORCH_CHECK(offs->dim() == 1, "offs must be 1-D, got ", offs->dim(), "-D");
    check_same_device(a, *offs, "_grouped_mm");
    o = offs->contiguous();
    g.groups = o.size(0);
    g.offs = o.const_data_ptr<int32_t>();
  }
  if (a2 && !b2) {
    TORCH_CHECK(g.groups == b.size(0), "matrix batch sizes have to match");
    out = at::empty({a.size(0), b.size(2)}, a.options());
    g.mode = 0;
    g.m = a.size(0), g.n = b.size(2), g.k = a.size(1);
  } else if (!a2 && b2) {
    TORCH_CHECK(g.groups == a.size(0), "matrix batch sizes have to match");
    out = at::empty({a.size(1), b.size(1)}, a.options());
    g.mode = 1;
    g.m = a.size(1), g.n = b.size(1), g.k = a.size(2);
  } else if (a2 && b2) {
    TORCH_CHECK(a.size(1) == b.size(0), "contraction dimension of mat_a and mat_b must match");
    out = at::empty({g.groups, a.size(0), b.size(1)}, a.options());
    g.mode = 2;
    g.m = a.size(0), g.n = b.size(1), g.k = a.size(1);
  } else {
    TORCH_CHECK(a.size(0) == b.size(0), "batched dimension has to match");
    out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
    g.mode = 3;
    g.groups = a.size(0);
    g.m = a.size(1), g.n = b.size(2), g.k = a.size(2);
  }
  auto strides3 = [](const at::Tensor &t, int64_t *s) {
    int64_t d = t.dim() - 2;
    s[0] = d ? t.stride(0) : 0;
    s[1] = t.stride(d);
    s[2] = t.stride(d + 1);
  };
  strides3(a, g.sa);
  strides3(b, g.sb);
  strides3(out, g.sc);
  g.a = a.const_data_ptr();
  g.b = b.const_data_ptr();
  g.c = out.data_ptr();
  bool ok;
  g.dtype = to_tnk(a.scalar_type(), &ok);
  g.fault = fault_sink(a.device().index(), "_grouped_mm", false);
  g.fault.kind = TNRT_FAULT_MESSAGE;
  if (out.numel() == 0) return out;
  launch_kernel<TNK_K_GROUPED_GEMM>(a.device().index(), g, "aten::_grouped_mm");
  return out;
}

at::Tensor &baddbmm_out(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                        const c10::Scalar &beta, const c10::Scalar &alpha, at::Tensor &out) {
  check_bmm(a, b);
  TORCH_CHECK(self.scalar_type() == a.scalar_type() && a.scalar_type() == b.scalar_type() &&
                  out.scalar_type() == a.scalar_type(),
              "expected scalar type ", a.scalar_type(), " but found ",
              self.scalar_type() != a.scalar_type() ? self.scalar_type() : b.scalar_type());
  check_same_device(a, b, "baddbmm");
  check_same_device(self, a, "baddbmm");
  std::vector<int64_t> shape{a.size(0), a.size(1), b.size(2)};
  if (!gemm_dtype_ok(a) && other_product_ok(a)) {
    at::expand_size(self, shape, "baddbmm");
    at::Tensor r = scaled_sum(self, product3(a, b), beta, alpha);
    at::native::resize_output(out, shape);
    return out.copy_(r);
  }
  if (!gemm_dtype_ok(a)) return FALLBACK(baddbmm_out, self, a, b, beta, alpha, out);
  at::expand_size(self, shape, "baddbmm");
  accumulate_product(self, a, b, shape, beta, alpha, out, "aten::baddbmm");
  return out;
}

at::Tensor baddbmm(const at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                   const c10::Scalar &beta, const c10::Scalar &alpha) {
  at::Tensor out = at::empty({0}, a.options());
  return baddbmm_out(self, a, b, beta, alpha, out);
}

at::Tensor &baddbmm_(at::Tensor &self, const at::Tensor &a, const at::Tensor &b,
                     const c10::Scalar &beta, const c10::Scalar &alpha) {
  TORCH_CHECK(self.dim() == 3 && self.size(0) == a.size(0) && self.size(1) == a.size(1) &&
                  self.size(2) == b.size(2),
              "baddbmm_: self must have the shape of the product, got ", self.sizes());
  return baddbmm_out(self, a, b, beta, alpha, self);
}

// addbmm: beta * self + alpha * sum_b batch1[b] @ batch2[b], one matrix
// product of the batches laid side by side: [n, B*k] @ [B*k, m]
at::Tensor &addbmm_out(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2,
                       const c10::Scalar &beta, const c10::Scalar &alpha, at::Tensor &out) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  const int64_t batches = b2.size(0), k = b2.size(1), m = b2.size(2);  // IndexError as CPU
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == batches, "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", batches);
  TORCH_CHECK(b1.size(2) == k, "Incompatible matrix sizes for bmm (", b1.size(1), "x", b1.size(2),
              " and ", k, "x", m, ")");
  at::Tensor side = b1.transpose(0, 1).reshape({b1.size(1), batches * k});
  at::Tensor r = at::addmm(self, side, b2.reshape({batches * k, m}), beta, alpha);
  return assign_result(out, r);  // out may be self (addbmm_)
}

at::Tensor addbmm(const at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2,
                  const c10::Scalar &beta, const c10::Scalar &alpha) {
  at::Tensor out = at::empty({0}, self.options().dtype(b1.scalar_type()));
  return addbmm_out(self, b1, b2, beta, alpha, out);
}

at::Tensor &addbmm_(at::Tensor &self, const at::Tensor &b1, const at::Tensor &b2,
                    const c10::Scalar &beta, const c10::Scalar &alpha) {
  return addbmm_out(self, b1, b2, beta, alpha, self);
}

namespace {

// ------------------------------------------------------------ vector products

void check_dot(const at::Tensor &a, const at::Tensor &b, const char *name) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ",
              b.dim(), "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name,
              " : expected both vectors to have same dtype, but found ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
              "] and src [", b.numel(), "] to have the same number of elements, but got ",
              a.numel(), " and ", b.numel(), " elements respectively");
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but "
              "found at least two devices, ",
              a.device(), " and ", b.device(), "!");
}

// The products accumulate in the dtype's accumulation type (fp32 for the
// half types), as CPU does, then round once.
at::Tensor sum_of_products(const at::Tensor &a, const at::Tensor &b) {
  auto st = a.scalar_type();
  if (a.is_complex()) {  // from the real parts (real reductions are native)
    at::Tensor x = at::view_as_real(a.resolve_conj()), y = at::view_as_real(b.resolve_conj());
    at::Tensor xr = x.select(-1, 0), xi = x.select(-1, 1), yr = y.select(-1, 0),
               yi = y.select(-1, 1);
    return at::complex((xr * yr - xi * yi).sum(), (xr * yi + xi * yr).sum());
  }
  bool half = st == at::kHalf || st == at::kBFloat16;
  at::Tensor x = half ? a.to(at::kFloat) : a, y = half ? b.to(at::kFloat) : b;
  at::Tensor r = (x * y).sum();
  return half || r.scalar_type() != st ? r.to(st) : r;
}

at::Tensor dot(const at::Tensor &a, const at::Tensor &b) {
  check_dot(a, b, "dot");
  if (a.scalar_type() == at::kBool) return FALLBACK(dot, a, b);
  return sum_of_products(a, b);
}

at::Tensor vdot(const at::Tensor &a, const at::Tensor &b) {
  check_dot(a, b, "vdot");
  if (a.scalar_type() == at::kBool) return FALLBACK(vdot, a, b);
  return sum_of_products(a.is_complex() ? a.conj().resolve_conj() : a, b);
}

// out = beta * self + alpha * (mat @ vec), as a one-column matrix product
at::Tensor &addmv_out(const at::Tensor &self, const at::Tensor &mat, const at::Tensor &vec,
                      const c10::Scalar &beta_, const c10::Scalar &alpha_, at::Tensor &out) {
  const c10::Scalar beta = scalar_as(beta_, mat.scalar_type());
  const c10::Scalar alpha = scalar_as(alpha_, mat.scalar_type());
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1,
              "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(), ", ",
              vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.numel(), "), mat (", mat.size(0), "x", mat.size(1),
              "), vec (", vec.size(0), ")");
  if (mat.scalar_type() != vec.scalar_type() || self.scalar_type() != mat.scalar_type() ||
      out.scalar_type() != mat.scalar_type() || mat.scalar_type() == at::kBool)
    return FALLBACK(addmv_out, self, mat, vec, beta, alpha, out);
  at::Tensor r = at::mm(mat, vec.unsqueeze(1)).squeeze(1);
  if (alpha.toComplexDouble() != 1.0) r = r * alpha;
  if (beta.toComplexDouble() != 0.0)
    r = r + self.expand({mat.size(0)}) * beta;  // beta 0: self ignored
  at::native::resize_output(out, {mat.size(0)});
  return out.copy_(r);
}

}  // namespace

namespace {

// ------------------------------------------------------------------- spectral

// Discrete Fourier transforms as products with the DFT matrix
// W[j][k] = exp(-+2 pi i j k / n), built on the host in double and applied
// with the device's complex matrix product in complex128 (the O(n) error
// growth of a direct sum stays far below float32's resolution). O(n^2) per
// transformed row: lengths above kMaxDftLength run on the CPU path.
constexpr int64_t kMaxDftLength = 2048;

bool dft_ok(const at::Tensor &x, at::IntArrayRef dim) {
  for (int64_t d : dim)
    if (x.size(d) > kMaxDftLength) return false;
  return true;
}

at::Tensor dft_matrix(int64_t n, bool forward, c10::Device device) {
  std::vector<double> w(static_cast<size_t>(2 * n * n));
  double sign = forward ? -1.0 : 1.0;
  for (int64_t j = 0; j < n; j++)
    for (int64_t k = 0; k < n; k++) {
      int64_t r = (j * k) % n;  // exact phase index: no large-argument cos/sin
      double a = sign * 2.0 * M_PI * static_cast<double>(r) / static_cast<double>(n);
      w[2 * (j * n + k)] = std::cos(a);
      w[2 * (j * n + k) + 1] = std::sin(a);
    }
  at::Tensor t = at::from_blob(w.data(), {n, n, 2}, at::TensorOptions().dtype(at::kDouble));
  return at::view_as_complex(t.to(device));  // copies before w goes
}

// unnormalised transform of complex x along each of dims
at::Tensor dft(const at::Tensor &x, at::IntArrayRef dims, bool forward) {
  at::Tensor y = x.to(at::kComplexDouble);
  for (int64_t d : dims) {
    int64_t n = y.size(d);
    if (n <= 1) continue;
    at::Tensor moved = y.movedim(d, -1);
    auto shape = moved.sizes().vec();
    at::Tensor rows = moved.reshape({-1, n});
    at::Tensor r = at::mm(rows, dft_matrix(n, forward, x.device()));
    y = r.reshape(shape).movedim(-1, d);
  }
  return y;
}

at::Tensor normalized(const at::Tensor &y, const at::Tensor &x, at::IntArrayRef dims,
                      int64_t normalization, c10::ScalarType out) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.size(d));
  at::Tensor r = y;
  if (normalization == 1)
    r = r / std::sqrt(n);  // by_root_n
  else if (normalization == 2)
    r = r / n;  // by_n
  return r.to(out);
}

// The output layout PyTorch's meta functions give an FFT on a device other
// than CUDA (_exec_fft in torch/_meta_registrations.py, after the CPU's
// kernels): the batch dimensions outermost, ordered by the input's strides
// (largest first), then the transformed ones in the order of dims,
// contiguous. FakeTensor, and so every compiled graph, expects it; the DFT
// below leaves its result in whatever layout its matrix products give.
std::vector<int64_t> fft_strides(at::IntArrayRef in_strides, at::IntArrayRef out_sizes,
                                 const std::vector<int64_t> &dims) {
  auto ndim = static_cast<int64_t>(out_sizes.size());
  std::vector<bool> transformed(ndim, false);
  for (int64_t d : dims) transformed[d] = true;
  std::vector<int64_t> batch;
  for (int64_t d = 0; d < ndim; d++)
    if (!transformed[d]) batch.push_back(d);
  std::stable_sort(batch.begin(), batch.end(),
                   [&](int64_t a, int64_t b) { return in_strides[a] > in_strides[b]; });
  std::vector<int64_t> strides(ndim);
  int64_t inner = 1;  // contiguous strides of [batch, out_sizes[dims]...]
  for (auto i = static_cast<int64_t>(dims.size()) - 1; i >= 0; i--) {
    strides[dims[i]] = inner;
    inner *= std::max<int64_t>(out_sizes[dims[i]], 1);
  }
  int64_t batch_numel = 1;
  for (auto i = static_cast<int64_t>(batch.size()) - 1; i >= 0; i--) {
    strides[batch[i]] = batch_numel * inner;
    batch_numel *= out_sizes[batch[i]];
  }
  return strides;
}

// dims sorted by the input's strides, largest first (all but the last one
// when keep_last), as the meta functions order them
std::vector<int64_t> sorted_dims(const at::Tensor &x, at::IntArrayRef dim, bool keep_last) {
  std::vector<int64_t> d(dim.begin(), dim.end());
  auto end = d.end() - (keep_last && !d.empty() ? 1 : 0);
  std::stable_sort(d.begin(), end, [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  return d;
}

at::Tensor with_strides(const at::Tensor &y, const std::vector<int64_t> &strides) {
  if (y.strides() == at::IntArrayRef(strides)) return y;
  at::Tensor out = at::empty_strided(y.sizes(), strides, y.options());
  return out.copy_(y);
}

c10::ScalarType complex_of(c10::ScalarType t) {
  return t == at::kDouble || t == at::kComplexDouble ? at::kComplexDouble : at::kComplexFloat;
}

at::Tensor fft_c2c(const at::Tensor &self, at::IntArrayRef dim, int64_t normalization,
                   bool forward) {
  if (!dft_ok(self, dim) ||
      (self.scalar_type() != at::kComplexFloat && self.scalar_type() != at::kComplexDouble))
    return FALLBACK(_fft_c2c, self, dim, normalization, forward);
  if (dim.empty()) return self.clone();  // (never the input itself)
  at::Tensor y = normalized(dft(self, dim, forward), self, dim, normalization, self.scalar_type());
  return with_strides(y, fft_strides(self.strides(), y.sizes(), sorted_dims(self, dim, false)));
}

at::Tensor fft_r2c(const at::Tensor &self, at::IntArrayRef dim, int64_t normalization,
                   bool onesided) {
  if (!dft_ok(self, dim) || (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble))
    return FALLBACK(_fft_r2c, self, dim, normalization, onesided);
  at::Tensor y =
      normalized(dft(self, dim, true), self, dim, normalization, complex_of(self.scalar_type()));
  if (onesided && !dim.empty()) {
    int64_t last = dim.back();
    y = y.narrow(last, 0, self.size(last) / 2 + 1);
  }
  if (!at::hasMKL()) return y.contiguous();  // the meta function's layout without MKL
  return with_strides(y, fft_strides(self.strides(), y.sizes(), sorted_dims(self, dim, true)));
}

// Inverse of a onesided spectrum: the complex inverse over the other dims
// first; then each row along the last dim is the spectrum of a real signal,
// whose missing half follows from Hermitian symmetry (X[n-k] = conj X[k]);
// the real part of its inverse is the signal (the imaginary parts of X[0]
// and X[n/2] drop out, as in pocketfft).
at::Tensor fft_c2r(const at::Tensor &self, at::IntArrayRef dim, int64_t normalization,
                   int64_t last_dim_size) {
  if (dim.empty() || last_dim_size > kMaxDftLength || !dft_ok(self, dim) ||
      (self.scalar_type() != at::kComplexFloat && self.scalar_type() != at::kComplexDouble))
    return FALLBACK(_fft_c2r, self, dim, normalization, last_dim_size);
  int64_t last = dim.back(), n = last_dim_size;
  int64_t have = n / 2 + 1;
  at::Tensor half = self.narrow(last, 0, std::min(self.size(last), have)).to(at::kComplexDouble);
  if (half.size(last) < have) {  // a shorter input is zero-padded
    auto pad = half.sizes().vec();
    pad[last] = have - half.size(last);
    half = at::cat({half, at::zeros(pad, half.options())}, last);
  }
  if (dim.size() > 1) half = dft(half, dim.slice(0, dim.size() - 1), false);
  int64_t missing = n - have;
  at::Tensor full = half;
  if (missing > 0) {
    // X[n-k] for k = missing..1 -> conj of X[missing]..X[1], in that order
    at::Tensor mirror = half.narrow(last, 1, missing).flip({last}).conj().resolve_conj();
    full = at::cat({half, mirror}, last);
  }
  at::Tensor y = at::real(dft(full, at::IntArrayRef{last}, false)).contiguous();
  c10::ScalarType out = self.scalar_type() == at::kComplexDouble ? at::kDouble : at::kFloat;
  double count = 1;
  for (int64_t d : dim) count *= static_cast<double>(d == last ? n : self.size(d));
  if (normalization == 1)
    y = y / std::sqrt(count);
  else if (normalization == 2)
    y = y / count;
  y = y.to(out);
  if (!at::hasMKL()) return y.contiguous();  // the meta function's layout without MKL
  // the meta function's: the complex transform over the other dims first
  // (c2c's layout), then the last dim's over that
  std::vector<int64_t> in_strides = self.strides().vec();
  if (dim.size() > 1) {
    auto rest = dim.slice(0, dim.size() - 1);
    in_strides = fft_strides(self.strides(), self.sizes(), sorted_dims(self, rest, false));
  }
  return with_strides(y, fft_strides(in_strides, y.sizes(), {last}));
}

}  // namespace

// ------------------------------------------------------------------ cdist
// torch.cdist's kernel as CPU runs it: p = 2 on more than 25 rows (or
// compute_mode 1) through the matrix-product form (_euclidean_dist, native),
// otherwise every pair's difference, reduced per p, over blocks of x1's rows
// so that the [batch, rows, r2, c] differences stay bounded.
namespace {
struct CdistShape {
  std::vector<int64_t> batch, out;
  int64_t nb = 1, r1 = 0, r2 = 0, c = 0;
  at::Tensor x1, x2;  // [nb, r1, c], [nb, r2, c]
};

CdistShape cdist_shape(const at::Tensor &x1, const at::Tensor &x2) {
  CdistShape s;
  s.r1 = x1.size(-2);
  s.r2 = x2.size(-2);
  s.c = x1.size(-1);
  s.batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  for (int64_t b : s.batch) s.nb *= b;
  auto expand = [&](const at::Tensor &x, int64_t r) {
    std::vector<int64_t> e(s.batch);
    e.insert(e.end(), {r, s.c});
    return x.expand(e).reshape({s.nb, r, s.c});
  };
  s.x1 = expand(x1, s.r1);
  s.x2 = expand(x2, s.r2);
  s.out = s.batch;
  s.out.insert(s.out.end(), {s.r1, s.r2});
  return s;
}

// Rows of x1 per block: about 16M difference elements each.
int64_t cdist_block(const CdistShape &s) {
  int64_t per_row = std::max<int64_t>(1, s.nb * s.r2 * s.c);
  return std::max<int64_t>(1, (int64_t{1} << 24) / per_row);
}

void check_cdist_direct(const at::Tensor &x1, const at::Tensor &x2) {
  TORCH_CHECK(x1.scalar_type() == x2.scalar_type(), "expected scalar type ", x1.scalar_type(),
              " but found ", x2.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(x1.scalar_type() == at::kFloat || x1.scalar_type() == at::kDouble,
                              "\"cdist\" not implemented for '", x1.scalar_type(), "'");
}
}  // namespace

at::Tensor cdist_forward(const at::Tensor &x1, const at::Tensor &x2, double p,
                         std::optional<int64_t> compute_mode) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1),
              "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X2 got: ", x2.scalar_type());
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  int64_t mode = compute_mode.value_or(0);
  TORCH_CHECK(mode >= 0 && mode <= 2, "possible modes: 0, 1, 2, but was: ", mode);
  CdistShape s = cdist_shape(x1, x2);
  if (s.r1 == 0 || s.r2 == 0 || s.nb == 0) return at::empty(s.out, x1.options());
  if (s.c == 0) return at::zeros(s.out, x1.options());
  if (p == 2 && (mode == 1 || (mode == 0 && (s.r1 > 25 || s.r2 > 25))))
    return at::_euclidean_dist(s.x1, s.x2).view(s.out);
  check_cdist_direct(x1, x2);
  at::Tensor out = at::empty({s.nb, s.r1, s.r2}, x1.options());
  int64_t block = cdist_block(s);
  for (int64_t i = 0; i < s.r1; i += block) {
    int64_t n = std::min(block, s.r1 - i);
    at::Tensor d = s.x1.narrow(1, i, n).unsqueeze(2) - s.x2.unsqueeze(1);  // [nb, n, r2, c]
    at::Tensor r;
    if (p == 0)
      r = d.ne(0).sum(-1, false, x1.scalar_type());
    else if (p == 1)
      r = d.abs().sum(-1);
    else if (p == 2)
      r = (d * d).sum(-1).sqrt();
    else if (std::isinf(p))
      r = d.abs().amax(-1);
    else
      r = d.abs().pow(p).sum(-1).pow(1.0 / p);
    out.narrow(1, i, n).copy_(r);
  }
  return out.view(s.out);
}

// The gradient for x1 of the direct form (x2's is this with the roles
// swapped, as autograd calls it), in x1's batch-expanded shape as CPU's.
at::Tensor cdist_backward(const at::Tensor &grad, const at::Tensor &x1, const at::Tensor &x2,
                          double p, const at::Tensor &cdist) {
  TORCH_CHECK(x1.is_contiguous(), "_cdist_backward requires X1 to be contiguous");
  TORCH_CHECK(x2.is_contiguous(), "_cdist_backward requires X2 to be contiguous");
  TORCH_CHECK(cdist.is_contiguous(), "_cdist_backward requires dist to be contiguous");
  TORCH_CHECK(grad.is_contiguous(), "_cdist_backward requires grad to be contiguous");
  CdistShape s = cdist_shape(x1, x2);
  std::vector<int64_t> xshape(s.batch);
  xshape.insert(xshape.end(), {s.r1, s.c});
  if (s.r1 == 0 || s.r2 == 0 || s.c == 0 || s.nb == 0 || p == 0)
    return at::zeros(xshape, x1.options());
  check_cdist_direct(x1, x2);
  at::Tensor g = grad.reshape({s.nb, s.r1, s.r2}), dist = cdist.reshape({s.nb, s.r1, s.r2});
  at::Tensor out = at::empty({s.nb, s.r1, s.c}, x1.options());
  int64_t block = cdist_block(s);
  for (int64_t i = 0; i < s.r1; i += block) {
    int64_t n = std::min(block, s.r1 - i);
    at::Tensor d = s.x1.narrow(1, i, n).unsqueeze(2) - s.x2.unsqueeze(1);  // [nb, n, r2, c]
    at::Tensor gi = g.narrow(1, i, n).unsqueeze(-1), di = dist.narrow(1, i, n).unsqueeze(-1);
    at::Tensor zero = at::zeros({}, d.options());
    at::Tensor t;
    if (p == 1) {
      t = d.sign() * gi;
    } else if (p < 2) {  // 0 where the distance is 0, or a coordinate is for p < 1
      at::Tensor v = d.sign() * d.abs().pow(p - 1) * gi / di.pow(p - 1);
      at::Tensor z = p < 1 ? at::logical_or(di == 0, d == 0) : (di == 0).expand_as(d);
      t = at::where(z, zero, v);
    } else if (p == 2) {
      t = at::where(di == 0, zero, gi * d / di);
    } else if (std::isinf(p)) {
      t = gi * d.sign() * (d.abs() == di).to(d.scalar_type());
    } else {
      t = at::where(di == 0, zero, d * d.abs().pow(p - 2) * gi / di.pow(p - 1));
    }
    out.narrow(1, i, n).copy_(t.sum(2));
  }
  return out.view(xshape);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_solve_triangular", linalg_solve_triangular);
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
  m.impl("linalg_solve_triangular.out", linalg_solve_triangular_out);
  m.impl("mm", mm);
  m.impl("_grouped_mm", grouped_mm);
  m.impl("mm.out", mm_out);
  m.impl("addmm", addmm);
  m.impl("addmm.out", addmm_out);
  m.impl("addmm_", addmm_);
  m.impl("_addmm_activation", addmm_activation);
  m.impl("_addmm_activation.out", addmm_activation_out);
  m.impl("addr_", addr_);
  m.impl("addr", outer_sum);
  m.impl("addr.out", addr_out);
  m.impl("addbmm", addbmm);
  m.impl("addbmm.out", addbmm_out);
  m.impl("addbmm_", addbmm_);
  m.impl("bmm", bmm);
  m.impl("bmm.out", bmm_out);
  m.impl("baddbmm", baddbmm);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("baddbmm_", baddbmm_);
  m.impl("_fft_c2c", fft_c2c);
  m.impl("_fft_r2c", fft_r2c);
  m.impl("_fft_c2r", fft_c2r);
  m.impl("dot", dot);
  m.impl("vdot", vdot);
  m.impl("addmv.out", addmv_out);
}

}  // namespace torch_neuronx
