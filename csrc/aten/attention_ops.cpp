// scaled_dot_product_attention on neuron: the backend choice (PyTorch's
// _fused_sdp_choice stub for PrivateUse1) and the overrideable fused
// attention forward/backward, computed by the flash-style kernel
// (kernels/attention.c). Dropout and masks that need a gradient take the
// math path, as do shapes the kernel does not cover. Also the inference
// fast path of nn.MultiheadAttention / nn.TransformerEncoderLayer
// (_native_multi_head_attention, _masked_softmax, ...), composed of native ops.
#include "neuron.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace torch_neuronx {
namespace {

bool attention_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

int64_t neuron_sdp_choice(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                          const std::optional<at::Tensor> &mask, double dropout_p, bool is_causal,
                          std::optional<double> scale, bool enable_gqa) {
  auto &ctx = at::globalContext();
  bool ok = ctx.userEnabledOverrideableSDP() && dropout_p == 0.0 && q.dim() == 4 && k.dim() == 4 &&
            v.dim() == 4 && !q.is_nested() && attention_dtype(q.scalar_type()) &&
            k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
            q.size(0) == k.size(0) && k.size(0) == v.size(0) && k.size(1) == v.size(1) &&
            k.size(1) > 0 && q.size(1) % k.size(1) == 0 && (q.size(1) == k.size(1) || enable_gqa) &&
            k.size(2) == v.size(2) && q.size(3) == k.size(3) && q.size(2) > 0 && k.size(2) > 0 &&
            q.size(3) > 0 && v.size(3) > 0 && q.device() == k.device() && k.device() == v.device();
  if (ok && mask.has_value() && mask->defined()) {
    const at::Tensor &m = *mask;
    ok = (m.scalar_type() == at::kBool || at::isFloatingType(m.scalar_type())) && m.dim() <= 4 &&
         !m.requires_grad() && m.device() == q.device() &&
         at::is_expandable_to(m.sizes(), {q.size(0), q.size(1), q.size(2), k.size(2)});
  }
  if (ok) return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);
}

// fp32 view with a contiguous last dimension (what the kernel reads).
at::Tensor as_f32(const at::Tensor &t) {
  at::Tensor f = t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
  return f.stride(-1) == 1 ? f : f.contiguous();
}

// [B, L, H, E] storage seen as [B, H, L, E]: heads interleaved per position,
// so the usual transpose(1, 2).reshape(B, L, H * E) that follows is free.
at::Tensor bhle(int64_t b, int64_t h, int64_t l, int64_t e, const at::Tensor &like) {
  return at::empty({b, l, h, e}, like.options().dtype(at::kFloat)).permute({0, 2, 1, 3});
}

// An fp32 tensor shaped like `like` with last dimension e, in the layout
// PyTorch's meta function gives the fused attention's output and gradients
// (alloc_with_matching_layout / empty_like): compiled graphs assert it.
at::Tensor matching_layout(const at::Tensor &like, int64_t e) {
  auto opts = like.options().dtype(at::kFloat);
  if (e == like.size(3)) return at::empty_like(like, opts);
  std::array<int64_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::array<int64_t, 4> sizes{like.size(0), like.size(1), like.size(2), e}, strides{};
  int64_t st = 1;
  for (int i = 3; i >= 0; i--) {
    strides[order[i]] = st;
    st *= sizes[order[i]];
  }
  return at::empty_strided(sizes, strides, opts);
}

// The kernels write rows with unit stride: a result whose last dimension is
// not innermost is computed in a (b, l, h, e) buffer and copied.
at::Tensor kernel_buffer(const at::Tensor &result) {
  if (result.stride(3) == 1) return result;
  return bhle(result.size(0), result.size(1), result.size(2), result.size(3), result);
}

at::Tensor finish(at::Tensor &result, const at::Tensor &buffer, const at::Tensor &like) {
  if (!buffer.is_same(result)) result.copy_(buffer);
  return like.scalar_type() == at::kFloat ? result : result.to(like.scalar_type());
}

void set_strides(const at::Tensor &t, int64_t *s) {
  for (int d = 0; d < 3; d++) s[d] = t.stride(d);
}

void fill_common(tnk_sdpa_args_t *a, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                 const at::Tensor &mask, bool causal, std::optional<double> scale) {
  a->batch = q.size(0);
  a->heads = q.size(1);
  a->kv_heads = k.size(1);
  a->lq = q.size(2);
  a->lk = k.size(2);
  a->e = q.size(3);
  a->ev = v.size(3);
  a->q = q.const_data_ptr<float>();
  a->k = k.const_data_ptr<float>();
  a->v = v.const_data_ptr<float>();
  set_strides(q, a->sq);
  set_strides(k, a->sk);
  set_strides(v, a->sv);
  a->causal = causal;
  a->scale =
      static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(a->e)));
  if (mask.defined()) {
    a->mask = mask.const_data_ptr();
    a->mask_kind = mask.scalar_type() == at::kBool ? 1 : 2;
    for (int d = 0; d < 4; d++) a->sm[d] = mask.stride(d);
  }
}

at::Tensor prepare_mask(const std::optional<at::Tensor> &bias, const at::Tensor &q,
                        const at::Tensor &k) {
  if (!bias.has_value() || !bias->defined()) return at::Tensor();
  at::Tensor m = bias->scalar_type() == at::kBool ? *bias : bias->to(at::kFloat);
  return m.expand({q.size(0), q.size(1), q.size(2), k.size(2)});
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                  const std::optional<at::Tensor> &attn_bias, double dropout_p, bool is_causal,
                  bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "neuron fused attention: dropout is computed by the math path");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "neuron fused attention expects 4-D query, key and value");
  TORCH_CHECK(query.size(1) % key.size(1) == 0,
              "number of heads in key/value must divide "
              "the number of heads in query");
  at::Tensor q = as_f32(query), k = as_f32(key), v = as_f32(value);
  at::Tensor mask = prepare_mask(attn_bias, q, k);
  int64_t b = q.size(0), h = q.size(1), lq = q.size(2);
  at::Tensor result = matching_layout(query, v.size(3));
  at::Tensor o = kernel_buffer(result);
  at::Tensor lse = at::empty({b, h, lq}, q.options().dtype(at::kFloat));
  tnk_sdpa_args_t a{};
  fill_common(&a, q, k, v, mask, is_causal, scale);
  a.o = o.data_ptr<float>();
  a.lse = lse.data_ptr<float>();
  set_strides(o, a.so);
  launch_kernel<TNK_K_SDPA_FORWARD>(query.device().index(), a,
                                    "aten::_scaled_dot_product_fused_attention_overrideable");
  at::Tensor out = finish(result, o, query);
  at::Tensor none = at::empty({0}, query.options().dtype(at::kLong));
  // No dropout, so no RNG state: 0-dim seed and offset, as the meta function.
  at::Tensor no_rng = at::empty({}, query.options().dtype(at::kLong));
  return {out,
          lse,
          none,
          none,
          c10::SymInt(lq),
          c10::SymInt(key.size(2)),
          no_rng,
          no_rng,
          at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_overrideable_backward(
    const at::Tensor &grad_out, const at::Tensor &query, const at::Tensor &key,
    const at::Tensor &value, const at::Tensor &attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor &out, const at::Tensor &logsumexp, const at::Tensor &cum_seq_q,
    const at::Tensor &cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor &philox_seed, const at::Tensor &philox_offset,
    std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "neuron fused attention: dropout is computed by the math path");
  TORCH_CHECK(!grad_input_mask[3],
              "neuron fused attention does not compute the gradient of "
              "attn_mask; a mask that requires grad takes the math path");
  at::Tensor q = as_f32(query), k = as_f32(key), v = as_f32(value);
  at::Tensor go = as_f32(grad_out), o = as_f32(out);
  at::Tensor lse = logsumexp.contiguous();
  at::Tensor mask =
      prepare_mask(attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt, q, k);
  at::Tensor rq = matching_layout(query, q.size(3)), rk = matching_layout(key, k.size(3)),
             rv = matching_layout(value, v.size(3));
  at::Tensor gq = kernel_buffer(rq), gk = kernel_buffer(rk), gv = kernel_buffer(rv);
  tnk_sdpa_args_t a{};
  fill_common(&a, q, k, v, mask, is_causal, scale);
  a.go = go.const_data_ptr<float>();
  a.o = const_cast<float *>(o.const_data_ptr<float>());
  a.lse = const_cast<float *>(lse.const_data_ptr<float>());
  a.gq = gq.data_ptr<float>();
  a.gk = gk.data_ptr<float>();
  a.gv = gv.data_ptr<float>();
  set_strides(go, a.sgo);
  set_strides(o, a.so);
  set_strides(gq, a.sgq);
  set_strides(gk, a.sgk);
  set_strides(gv, a.sgv);
  launch_kernel<TNK_K_SDPA_BACKWARD>(
      query.device().index(), a, "aten::_scaled_dot_product_fused_attention_overrideable_backward");
  return {finish(rq, gq, query), finish(rk, gk, key), finish(rv, gv, value), at::Tensor()};
}

namespace {

// ---------------------------------------- nn.MultiheadAttention fast path
// The inference fast path of nn.MultiheadAttention and
// nn.TransformerEncoderLayer (eval, no grad): _native_multi_head_attention
// and the ops it is made of, composed of native ops. Masks are boolean,
// true where attention is not allowed; mask_type 0 is an [L, L] attention
// mask, 1 a [B, L] key-padding mask, 2 a mask of the scores' shape. A row
// with every key masked is NaN, as on CPU.

at::Tensor expand_softmax_mask(const at::Tensor &input, const at::Tensor &mask_in,
                               std::optional<int64_t> mask_type) {
  TORCH_CHECK(mask_in.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  int64_t type = mask_type.value_or(2);
  if (mask_in.dim() != 2 || input.dim() != 4) type = 2;  // 0 and 1 need a 2-D mask, 4-D input
  if (type == 1) {
    TORCH_CHECK(input.size(0) == mask_in.size(0) && input.size(2) == mask_in.size(1),
                "For mask_type == 1 mask shape should be (B, L)");
    return mask_in.view({input.size(0), 1, 1, input.size(3)}).expand(input.sizes());
  }
  if (type == 0) {
    TORCH_CHECK(input.size(2) == mask_in.size(0) && input.size(2) == mask_in.size(1),
                "For mask_type == 0 mask shape should be (L, L)");
    return mask_in.view({1, 1, input.size(2), input.size(3)}).expand(input.sizes());
  }
  TORCH_CHECK(input.sizes() == mask_in.sizes(),
              "For mask_type == 2 mask shape should match input shape");
  return mask_in;
}

at::Tensor masked_softmax(const at::Tensor &input, const at::Tensor &mask_in,
                          std::optional<int64_t> dim_opt, std::optional<int64_t> mask_type) {
  at::Tensor mask = expand_softmax_mask(input, mask_in, mask_type);
  int64_t dim = dim_opt.has_value() ? at::maybe_wrap_dim(*dim_opt, input.dim()) : input.dim() - 1;
  // masked entries of a row are 0; a row with every entry masked is NaN, as on CPU
  at::Tensor x = input.masked_fill(mask, -std::numeric_limits<double>::infinity());
  return at::_softmax(x, dim, false);
}

at::Tensor masked_softmax_backward(const at::Tensor &grad, const at::Tensor &output,
                                   const at::Tensor &mask_in, std::optional<int64_t> dim_opt) {
  TORCH_CHECK(grad.sizes() == output.sizes(),
              "_masked_softmax_backward: grad and output shapes differ");
  at::Tensor mask = mask_in.expand(output.sizes());
  int64_t dim = dim_opt.has_value() ? at::maybe_wrap_dim(*dim_opt, output.dim()) : output.dim() - 1;
  at::Tensor g = grad.masked_fill(mask, 0);
  return at::_softmax_backward_data(g, output, dim, output.scalar_type()).masked_fill_(mask, 0);
}

// q = (q + b_q) / sqrt(d), k = k + b_k, v = v + b_v, each [B, H, T, d]
std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv(
    const at::Tensor &qkv, const at::Tensor &qkv_bias, int64_t num_heads) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0, "expected qkv of shape [B, T, 3 * D]");
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / 3;
  TORCH_CHECK(D % num_heads == 0, "embed_dim ", D, " is not divisible by num_heads ", num_heads);
  const int64_t dh = D / num_heads;
  at::Tensor x = (qkv + qkv_bias).view({B, T, 3, num_heads, dh}).permute({2, 0, 3, 1, 4});
  // the scale as CPU computes it: 1 / sqrt(dh) in the element type
  double inv = qkv.scalar_type() == at::kDouble
                   ? 1.0 / std::sqrt(static_cast<double>(dh))
                   : static_cast<double>(1.0f / std::sqrt(static_cast<float>(dh)));
  at::Tensor q = x[0].mul(inv).contiguous();
  return {q, x[1].contiguous(), x[2].contiguous()};
}

std::tuple<at::Tensor, at::Tensor> native_mha(
    const at::Tensor &query, const at::Tensor &key, const at::Tensor &value, int64_t embed_dim,
    int64_t num_head, const at::Tensor &qkv_weight, const at::Tensor &qkv_bias,
    const at::Tensor &proj_weight, const at::Tensor &proj_bias,
    const std::optional<at::Tensor> &mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  const int64_t D = embed_dim;
  TORCH_CHECK(!query.is_nested(),
              "neuron: nested tensors in the multi-head attention fast path "
              "are not supported; pass padded tensors and a key padding mask");
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.size(2) == embed_dim, "passed-in embed_dim ", embed_dim,
              " didn't match last dim of query ", query.size(2));
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(),
              "-D tensor");
  TORCH_CHECK(D * 3 == qkv_weight.size(0), "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(D == qkv_weight.size(1), "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.size(0) == 3 * D,
              "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(D % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
  const int64_t B = query.size(0), T = query.size(1);
  if (query.numel() == 0) return {at::empty_like(query), at::Tensor()};
  // [B, T, 3D]: one product for self-attention, else per part
  at::Tensor qkv;
  if (key.is_same(value) && query.is_same(key)) {
    qkv = at::matmul(query, qkv_weight.t());
  } else if (key.is_same(value)) {
    std::vector<at::Tensor> w = qkv_weight.split_with_sizes({D, 2 * D}, 0);
    qkv = at::cat({at::matmul(query, w[0].t()), at::matmul(key, w[1].t())}, 2);
  } else {
    std::vector<at::Tensor> w = qkv_weight.chunk(3, 0);
    qkv = at::cat(
        {at::matmul(query, w[0].t()), at::matmul(key, w[1].t()), at::matmul(value, w[2].t())}, 2);
  }
  auto [q, k, v] = at::_transform_bias_rescale_qkv(qkv, qkv_bias, num_head);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));  // [B, H, T, T]
  at::Tensor attn;
  if (mask.has_value() && mask->defined()) {
    at::Tensor m = mask->scalar_type() == at::kBool ? *mask : mask->to(at::kBool);
    attn = at::_masked_softmax(scores, m, scores.dim() - 1, mask_type);
  } else {
    attn = at::_softmax(scores, -1, false);
  }
  at::Tensor ctx = at::matmul(attn, v).transpose(1, 2).reshape({B, T, D});
  at::Tensor out = at::linear(ctx, proj_weight, proj_bias);
  if (!need_weights) return {out, at::Tensor()};
  if (average_attn_weights) attn = attn.sum(1).div_(static_cast<double>(num_head));
  return {out, attn};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_masked_softmax", masked_softmax);
  m.impl("_masked_softmax_backward", masked_softmax_backward);
  m.impl("_transform_bias_rescale_qkv", transform_bias_rescale_qkv);
  m.impl("_native_multi_head_attention", native_mha);
  // ATen's own device-generic composite (CPU and CUDA register the same
  // function): layer norms, the attention above, the feed-forward addmms.
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(at::native::transformer_encoder_layer_forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable", sdpa_overrideable);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", sdpa_overrideable_backward);
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::neuron_sdp_choice);
}
