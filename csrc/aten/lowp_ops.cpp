// Low-precision matrix products (kernels/lowp_gemm.c): torch._int_mm (int8
// x int8 -> int32, exact), torch._weight_int8pack_mm (weight-only int8,
// the decode GEMV streams the int8 weight once) and torch._scaled_mm (fp8
// operands widened while packing, tensor-wise and row-wise fp32 scales,
// bias, bf16 / fp16 / fp32 / fp8 output; MX block scales). Errors follow
// CPU's for the first two; _scaled_mm takes CUDA's size rules (dimensions
// multiples of 16, MX scale sizes) with CUDA's messages, and, as CUDA's eager
// op (which copies such operands for cuBLAS), any operand strides.
#include "neuron.h"

#include <ATen/Version.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>

namespace torch_neuronx {

int32_t lowp_format(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return TNK_F32;
    case at::kBFloat16: return TNK_BF16;
    case at::kHalf: return TNK_F16;
    case at::kFloat8_e4m3fn: return TNK_F8E4M3;
    case at::kFloat8_e5m2: return TNK_F8E5M2;
    case at::kChar: return TNK_I8;
    default: return -1;
  }
}

namespace {

void same_device(const at::Tensor &a, const at::Tensor &b, const char *op) {
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "! (when checking argument for ", op, ")");
}

void launch(const at::Tensor &out, tnk_lowp_gemm_args_t &g, const char *name) {
  g.fault = fault_sink(out.device().index(), name, false);
  g.fault.kind = TNRT_FAULT_MESSAGE;
  launch_kernel<TNK_K_LOWP_GEMM>(out.device().index(), g, name);
}

// ---- _int_mm ----------------------------------------------------------------

at::Tensor &int_mm_out(const at::Tensor &self, const at::Tensor &mat2, at::Tensor &out) {
  TORCH_CHECK(self.dim() == 2, "_int_mm: Expected self to be of dimension 2 but got ", self.dim());
  TORCH_CHECK(mat2.dim() == 2, "_int_mm: Expected mat2 to be of dimension 2 but got ", mat2.dim());
  TORCH_CHECK(self.size(1) == mat2.size(0),
              "_int_mm: self.size(1) needs to match mat2.size(0) but got ", self.size(1), " and ",
              mat2.size(0));
  TORCH_CHECK(self.scalar_type() == at::kChar, "_int_mm: Expected self dtype to be int8 but got ",
              self.scalar_type());
  TORCH_CHECK(mat2.scalar_type() == at::kChar,
              "_int_mm: Expected mat2 dtype to be of type int8 but got ", mat2.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kInt, "_int_mm: Expected result dtype to be int32 but got ",
              out.scalar_type());
  same_device(self, mat2, "_int_mm");
  same_device(self, out, "_int_mm");
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  if (out.numel() == 0) return out;
  tnk_lowp_gemm_args_t g{};
  g.m = self.size(0), g.n = mat2.size(1), g.k = self.size(1);
  g.a = self.const_data_ptr(), g.b = mat2.const_data_ptr();
  at::Tensor res = out.is_non_overlapping_and_dense() ? out : at::empty_like(out);
  g.c = res.data_ptr();
  g.sa_r = self.stride(0), g.sa_c = self.stride(1);
  g.sb_r = mat2.stride(0), g.sb_c = mat2.stride(1);
  g.sc_r = res.stride(0), g.sc_c = res.stride(1);
  g.a_fmt = g.b_fmt = TNK_I8;
  g.c_dtype = TNK_I32;
  launch(res, g, "aten::_int_mm");
  if (!res.is_same(out)) out.copy_(res);
  return out;
}

at::Tensor int_mm(const at::Tensor &self, const at::Tensor &mat2) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kInt));
  return int_mm_out(self, mat2, out);
}

// ---- _weight_int8pack_mm ----------------------------------------------------

at::Tensor weight_int8pack_mm(const at::Tensor &A, const at::Tensor &B, const at::Tensor &scales) {
  const char *op = "_weight_int8pack_mm";
  (void)A.size(1);  // a 1-D A: IndexError, as CPU
  TORCH_CHECK(A.dim() == 2, op, ": expect A to be 2D tensor.");
  auto st = A.scalar_type();
  TORCH_CHECK(st == at::kBFloat16 || st == at::kHalf || st == at::kFloat, op,
              ": expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(B.scalar_type() == at::kChar, op, ": expect B to be int8 tensor.");
  TORCH_CHECK(B.dim() == 2 && B.size(1) == A.size(1), op, ": expect B.size(1) == ", A.size(1));
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == B.size(0), op,
              ": expect scales to be 1d tensor with size ", B.size(0));
  TORCH_CHECK(scales.scalar_type() == st, "expected scalar type ", st, " but found ",
              scales.scalar_type());
  same_device(A, B, op);
  same_device(A, scales, op);
  at::Tensor out = at::empty({A.size(0), B.size(0)}, A.options());
  if (out.numel() == 0) return out;
  at::Tensor s = scales.contiguous();
  tnk_lowp_gemm_args_t g{};
  g.m = A.size(0), g.n = B.size(0), g.k = A.size(1);
  g.a = A.const_data_ptr(), g.b = B.const_data_ptr(), g.c = out.data_ptr();
  g.sa_r = A.stride(0), g.sa_c = A.stride(1);
  g.sb_r = B.stride(1), g.sb_c = B.stride(0);  // B is [N, K]: its transpose is the operand
  g.sc_r = out.stride(0), g.sc_c = 1;
  g.a_fmt = lowp_format(st), g.b_fmt = TNK_I8, g.c_dtype = lowp_format(st);
  g.sb_mode = TNK_SCALE_VECTOR, g.sb = s.const_data_ptr(), g.sb_dtype = lowp_format(st),
  g.sb_ld = 1;
  launch(out, g, "aten::_weight_int8pack_mm");
  return out;
}

// ---- int4 weight-only: _convert_weight_to_int4pack_for_cpu and
// _weight_int4pack_mm_for_cpu -------------------------------------------------
// CPU's packed format, in the layout CPU's kernels use for the ISA ATen runs
// on this host (tnk.h, tnk_int4_mm): a weight packed on CPU (TorchAO packs
// there) runs on neuron after .to("neuron"), and one packed on neuron runs
// on CPU. Errors are CPU's.

int32_t int4_layout() {
  static const int32_t layout = [] {
    std::string cap = at::get_cpu_capability();
    if (cap.rfind("AVX512", 0) == 0) return (int32_t)TNK_INT4_LANES64;
    if (cap == "AVX2") return (int32_t)TNK_INT4_HALVES32;
    return (int32_t)TNK_INT4_PAIRS;
  }();
  return layout;
}

at::Tensor convert_weight_to_int4pack(const at::Tensor &in, int64_t innerKTiles) {
  (void)innerKTiles;  // CPU's layout has no k tiles; CPU ignores it too
  const char *op = "_convert_weight_to_int4pack_cpu";
  TORCH_CHECK(in.dim() == 2, op, " : expect weight to be 2D tensor.");
  TORCH_CHECK(in.scalar_type() == at::kInt, op, " : expect weight to be kInt.");
  at::Tensor w = in.contiguous();
  int64_t n = w.size(0), k = w.size(1);
  TORCH_CHECK(n % 16 == 0, op, " : expect N to be dividable by 16");
  TORCH_CHECK(k % 2 == 0, "_convert_weight_to_int4pack: expect K to be dividable by 2");
  at::Tensor out = at::empty({n, k / 2}, w.options().dtype(at::kByte));
  if (out.numel() == 0) return out;
  tnk_int4_pack_args_t a{};
  a.n = n, a.k = k, a.w = w.const_data_ptr<int32_t>(), a.out = out.data_ptr<uint8_t>();
  a.layout = int4_layout();
  launch_kernel<TNK_K_INT4_PACK>(out.device().index(), a,
                                 "aten::_convert_weight_to_int4pack_for_cpu");
  return out;
}

at::Tensor weight_int4pack_mm(const at::Tensor &A, const at::Tensor &B, int64_t qGroupSize,
                              const at::Tensor &qScaleAndZeros) {
  const char *op = "_weight_int4pack_mm_cpu";
  int64_t m = A.size(0), n = B.size(0), k = A.size(1);  // a 1-D A: IndexError, as CPU
  auto st = A.scalar_type();
  TORCH_CHECK(st == at::kBFloat16 || st == at::kHalf || st == at::kFloat, op,
              " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(A.is_contiguous(), op, " : expect A to be contiguous.");
  TORCH_CHECK(A.dim() == 2, op, " : expect A to be 2D tensor.");
  TORCH_CHECK(B.scalar_type() == at::kByte, op, " : expect B to be uint8 tensor.");
  TORCH_CHECK(B.is_contiguous(), op, " : expect B to be contiguous.");
  TORCH_CHECK(B.size(1) == k / 2, op, " : expect B.size(1) to be K/2, got ", B.size(1));
  TORCH_CHECK(qGroupSize == 32 || qGroupSize == 64 || qGroupSize == 128 || qGroupSize == 256, op,
              ": expect qGroupSize to be 32, 64, 128 or 256, got ", qGroupSize);
  TORCH_CHECK(
      qScaleAndZeros.dim() == 3 && qScaleAndZeros.size(1) == n && qScaleAndZeros.size(2) == 2, op,
      ": expect qScaleAndZeros to be 3d tensor with sizes [:, ", n, ", 2]");
  TORCH_CHECK(qScaleAndZeros.scalar_type() == st, "expected scalar type ", st, " but found ",
              qScaleAndZeros.scalar_type());
  // CPU reads the groups k needs without checking that they are there
  int64_t groups = (k + qGroupSize - 1) / qGroupSize;
  TORCH_CHECK(qScaleAndZeros.size(0) >= groups, op, ": expect qScaleAndZeros to hold ", groups,
              " groups of ", qGroupSize, " (K = ", k, "), got ", qScaleAndZeros.size(0));
  // what the packing takes (CPU reads past a packed weight of any other shape)
  TORCH_CHECK(n % 16 == 0 && k % 2 == 0, op,
              " : expect N to be dividable by 16 and K by 2, as the packing requires, got N = ", n,
              ", K = ", k);
  same_device(A, B, op);
  same_device(A, qScaleAndZeros, op);
  at::Tensor out = at::empty({m, n}, A.options());
  if (out.numel() == 0) return out;
  at::Tensor sz = qScaleAndZeros.contiguous();
  tnk_int4_mm_args_t g{};
  g.m = m, g.n = n, g.k = k, g.group = qGroupSize, g.lda = k, g.ldc = n;
  g.c = out.data_ptr(), g.a = A.const_data_ptr(), g.sz = sz.const_data_ptr();
  g.b = B.const_data_ptr<uint8_t>();
  g.layout = int4_layout(), g.dtype = lowp_format(st);
  g.fault = fault_sink(out.device().index(), "aten::_weight_int4pack_mm_for_cpu", false);
  g.fault.kind = TNRT_FAULT_MESSAGE;
  launch_kernel<TNK_K_INT4_MM>(out.device().index(), g, "aten::_weight_int4pack_mm_for_cpu");
  return out;
}

// ---- _scaled_mm ------------------------------------------------------------

bool is_fp8(c10::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }

at::Tensor &scaled_mm_out(const at::Tensor &self, const at::Tensor &mat2, const at::Tensor &scale_a,
                          const at::Tensor &scale_b, const std::optional<at::Tensor> &bias,
                          const std::optional<at::Tensor> &scale_result,
                          std::optional<c10::ScalarType> out_dtype, bool use_fast_accum,
                          at::Tensor &out) {
  (void)use_fast_accum;  // the sums are fp32 either way
  TORCH_CHECK(self.dim() == 2, "mat1 must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(is_fp8(self.scalar_type()) && is_fp8(mat2.scalar_type()),
              "Expected both inputs to be fp8 (float8_e4m3fn or float8_e5m2) types but got "
              "self.dtype=",
              self.scalar_type(), " and mat2.dtype=", mat2.scalar_type());
  TORCH_CHECK(!(self.scalar_type() == at::kFloat8_e5m2 && mat2.scalar_type() == at::kFloat8_e5m2),
              "Multiplication of two Float8_e5m2 matrices is not supported");
  for (const at::Tensor *t : {&mat2, &scale_a, &scale_b}) same_device(self, *t, "_scaled_mm");
  TORCH_CHECK(self.size(1) % 16 == 0,
              "Expected self.size(1) to be divisible by 16, but got self.size(1)=", self.size(1));
  TORCH_CHECK(mat2.size(0) % 16 == 0 && mat2.size(1) % 16 == 0,
              "Expected both dimensions of mat2 to be divisible by 16 but got ", mat2.sizes());
  int64_t m = self.size(0), n = mat2.size(1), k = self.size(1);
  tnk_lowp_gemm_args_t g{};
  g.sa_dtype = g.sb_dtype = TNK_F32;
  if (scale_a.scalar_type() == at::kFloat8_e8m0fnu &&
      scale_b.scalar_type() == at::kFloat8_e8m0fnu) {
    // MX: one power-of-two scale per 32 values of k, per row of self and
    // per column of mat2, in cuBLAS's swizzled layout (128 x 4 tiles)
    TORCH_CHECK_VALUE(k % 32 == 0, "For MX (blockwise) scaling, K must be a multiple of 32, got ",
                      k);
    int64_t blocks = (k / 32 + 3) / 4 * 4;
    int64_t ea = 128 * ((m + 127) / 128) * blocks, eb = 128 * ((n + 127) / 128) * blocks;
    TORCH_CHECK_VALUE(scale_a.numel() == ea && scale_b.numel() == eb,
                      "Invalid blockwise scaling configuration. For blockwise scaling, scale_a "
                      "should have ",
                      ea, " elements, got ", scale_a.numel(), ", scale_b should have ", eb,
                      " elements, got ", scale_b.numel(), ".");
    TORCH_CHECK_VALUE(scale_a.is_contiguous(), "scale_a must be contiguous");
    TORCH_CHECK_VALUE(scale_b.is_contiguous(), "scale_b must be contiguous");
    g.sa_mode = g.sb_mode = TNK_SCALE_BLOCK_MX;
    g.block = 32;
    g.sa_ld = g.sb_ld = blocks / 4;
    g.sa_dtype = g.sb_dtype = TNK_E8M0;
  } else if (scale_a.numel() == 1 && scale_b.numel() == 1) {
    TORCH_CHECK_VALUE(
        scale_a.scalar_type() == at::kFloat && scale_b.scalar_type() == at::kFloat,
        "For tensorwise scaling, both scale_a and scale_b must be float (fp32) tensors.");
    g.sa_mode = g.sb_mode = TNK_SCALE_TENSOR;
  } else {
    bool rowwise = scale_a.scalar_type() == at::kFloat && scale_b.scalar_type() == at::kFloat &&
                   scale_a.dim() == 2 && scale_b.dim() == 2 && scale_a.size(0) == m &&
                   scale_a.size(1) == 1 && scale_b.size(0) == 1 && scale_b.size(1) == n &&
                   scale_a.is_contiguous() && scale_b.is_contiguous();
    TORCH_CHECK_VALUE(
        rowwise, "Invalid scaling configuration.\n",
        "- For TensorWise scaling, a and b should be float8, scales should be float and "
        "singletons.\n",
        "- For RowWise scaling, a and b should be float8, scales should be float, scale_a should "
        "be (",
        m, ", 1) and scale_b should be (1, ", n, "), and both should be contiguous.\n",
        "Got scale_a.dtype()=", scale_a.scalar_type(), ", scale_a.size()=", scale_a.sizes(),
        ", scale_b.dtype()=", scale_b.scalar_type(), " and scale_b.size()=", scale_b.sizes());
    g.sa_mode = g.sb_mode = TNK_SCALE_VECTOR;
    g.sa_ld = g.sb_ld = 1;
  }
  auto odt = out_dtype.value_or(self.scalar_type());
  TORCH_CHECK(odt == at::kFloat || odt == at::kBFloat16 || odt == at::kHalf || is_fp8(odt),
              "_scaled_mm: out_dtype must be float32, bfloat16, float16, float8_e4m3fn or "
              "float8_e5m2, got ",
              odt);
  TORCH_CHECK(out.scalar_type() == odt, "Expected out tensor to have dtype ", odt, ", but got ",
              out.scalar_type(), " instead");
  same_device(self, out, "_scaled_mm");
  at::Tensor b;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == n, "Bias must be size ", n, " but got ",
                bias->numel());
    TORCH_CHECK(bias->scalar_type() == at::kFloat || bias->scalar_type() == at::kBFloat16 ||
                    bias->scalar_type() == at::kHalf,
                "Bias must be BFloat16, Half or Float, but got ", bias->scalar_type());
    same_device(self, *bias, "_scaled_mm");
    b = bias->contiguous();
  }
  at::native::resize_output(out, {m, n});
  if (out.numel() == 0) return out;
  // fp8 output: computed in fp32, divided by scale_result, then narrowed
  bool narrow = is_fp8(odt);
  at::Tensor res = narrow || !out.is_non_overlapping_and_dense()
                       ? at::empty({m, n}, out.options().dtype(narrow ? at::kFloat : odt))
                       : out;
  g.m = m, g.n = n, g.k = k;
  g.a = self.const_data_ptr(), g.b = mat2.const_data_ptr(), g.c = res.data_ptr();
  g.sa_r = self.stride(0), g.sa_c = self.stride(1);
  g.sb_r = mat2.stride(0), g.sb_c = mat2.stride(1);
  g.sc_r = res.stride(0), g.sc_c = res.stride(1);
  g.a_fmt = lowp_format(self.scalar_type()), g.b_fmt = lowp_format(mat2.scalar_type());
  g.c_dtype = lowp_format(res.scalar_type());
  g.sa = scale_a.const_data_ptr(), g.sb = scale_b.const_data_ptr();
  if (b.defined()) g.bias = b.const_data_ptr(), g.bias_dtype = lowp_format(b.scalar_type());
  launch(res, g, "aten::_scaled_mm");
  if (narrow) {
    if (scale_result.has_value() && scale_result->defined()) res.div_(*scale_result);
    out.copy_(res);
  } else if (!res.is_same(out)) {
    out.copy_(res);
  }
  return out;
}

at::Tensor scaled_mm(const at::Tensor &self, const at::Tensor &mat2, const at::Tensor &scale_a,
                     const at::Tensor &scale_b, const std::optional<at::Tensor> &bias,
                     const std::optional<at::Tensor> &scale_result,
                     std::optional<c10::ScalarType> out_dtype, bool use_fast_accum) {
  at::Tensor out = at::empty({0}, self.options().dtype(out_dtype.value_or(self.scalar_type())));
  return scaled_mm_out(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum,
                       out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_int_mm", int_mm);
  m.impl("_int_mm.out", int_mm_out);
  m.impl("_weight_int8pack_mm", weight_int8pack_mm);
  m.impl("_convert_weight_to_int4pack_for_cpu", convert_weight_to_int4pack);
  m.impl("_weight_int4pack_mm_for_cpu", weight_int4pack_mm);
  m.impl("_scaled_mm", scaled_mm);
  m.impl("_scaled_mm.out", scaled_mm_out);
}

}  // namespace torch_neuronx
