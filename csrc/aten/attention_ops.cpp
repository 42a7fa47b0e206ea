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
#include <vector>

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

// ---------------------------------------- flash attention's own ops
// aten::_flash_attention_forward / _backward, which
// torch.nn.attention.varlen.varlen_attn calls: packed variable-length
// batches (query [total_q, H, D] with cumulative lengths cum_seq_q / k,
// int32, batch + 1 entries, optional seqused_k) or padded batches ([B, L, H,
// D], no cumulative lengths); causal and windows aligned to the end of each
// sequence's keys, as flash attention aligns them; grouped-query heads. A
// query with no visible key gives zeros and log-sum-exp +inf, as CUDA's
// kernel. fp32, bf16 and fp16 (the kernel computes in fp32). Dropout,
// ALiBi slopes and paged keys (block_table) are not computed: they raise.

struct FlashShape {
  bool varlen;
  int64_t batch, heads, kv_heads, e, ev, total_q;
};

void check_cu(const at::Tensor &cu, const char *name, int64_t rows, const at::Tensor &q) {
  TORCH_CHECK(cu.scalar_type() == at::kInt, name,
              " must be int32 (cumulative sequence lengths), got ", cu.scalar_type());
  TORCH_CHECK(cu.dim() == 1 && cu.size(0) >= 1, name, " must be 1-D with batch + 1 entries");
  TORCH_CHECK(cu.device() == q.device(), name, " must be on ", q.device(), ", got ", cu.device());
  // the lengths decide which memory the kernel reads: check them on the host
  at::Tensor h = cu.cpu();
  const int32_t *c = h.const_data_ptr<int32_t>();
  TORCH_CHECK(c[0] == 0, name, "[0] must be 0, got ", c[0]);
  for (int64_t i = 1; i < h.size(0); i++)
    TORCH_CHECK(c[i] >= c[i - 1], name, " must be non-decreasing, but ", name, "[", i, "] = ", c[i],
                " < ", name, "[", i - 1, "] = ", c[i - 1]);
  TORCH_CHECK(c[h.size(0) - 1] <= rows, name, "[-1] = ", c[h.size(0) - 1],
              " is past the end of the packed tensor (", rows, " rows)");
}

FlashShape flash_shape(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                       const std::optional<at::Tensor> &cu_q,
                       const std::optional<at::Tensor> &cu_k) {
  bool varlen = cu_q.has_value() && cu_q->defined();
  TORCH_CHECK(varlen == (cu_k.has_value() && cu_k->defined()),
              "flash attention: give both cum_seq_q and cum_seq_k, or neither");
  TORCH_CHECK(attention_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              "flash attention on neuron supports float32, bfloat16 and float16 query, key and "
              "value of one dtype, got ",
              q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  int64_t dims = varlen ? 3 : 4;
  TORCH_CHECK(q.dim() == dims && k.dim() == dims && v.dim() == dims, "flash attention expects ",
              varlen ? "3-D [total, heads, dim]" : "4-D [batch, len, heads, dim]",
              " query, key and value, got ", q.dim(), "-D, ", k.dim(), "-D and ", v.dim(), "-D");
  TORCH_CHECK(q.device() == k.device() && k.device() == v.device(),
              "flash attention: query, key and value must be on one device");
  FlashShape f{varlen, 0, q.size(-2), k.size(-2), q.size(-1), v.size(-1), 0};
  TORCH_CHECK(k.size(-1) == f.e, "flash attention: query and key head dims differ (", f.e, " vs ",
              k.size(-1), ")");
  TORCH_CHECK(v.size(-2) == f.kv_heads && v.size(-3) == k.size(-3),
              "flash attention: key and value shapes differ");
  TORCH_CHECK(f.kv_heads > 0 && f.heads % f.kv_heads == 0,
              "flash attention: number of heads in "
              "key/value (",
              f.kv_heads, ") must divide the number of heads in query (", f.heads, ")");
  if (varlen) {
    check_cu(*cu_q, "cum_seq_q", q.size(0), q);
    check_cu(*cu_k, "cum_seq_k", k.size(0), q);
    TORCH_CHECK(cu_q->size(0) == cu_k->size(0), "flash attention: cum_seq_q has ", cu_q->size(0),
                " entries and cum_seq_k ", cu_k->size(0), "; both are batch + 1");
    f.batch = cu_q->size(0) - 1;
    f.total_q = q.size(0);
  } else {
    f.batch = q.size(0);
    TORCH_CHECK(k.size(0) == f.batch && v.size(0) == f.batch,
                "flash attention: query, key and value batch sizes differ");
  }
  return f;
}

// [.., L, H, D] storage seen by the kernel as (b, h, l) strides.
void flash_strides(const at::Tensor &t, bool varlen, int64_t *s) {
  if (varlen) {
    s[0] = 0;
    s[1] = t.stride(1);
    s[2] = t.stride(0);
  } else {
    s[0] = t.stride(0);
    s[1] = t.stride(2);
    s[2] = t.stride(1);
  }
}

void flash_common(tnk_sdpa_args_t *a, const FlashShape &f, const at::Tensor &q, const at::Tensor &k,
                  const at::Tensor &v, const at::Tensor &cu_q, const at::Tensor &cu_k,
                  const at::Tensor &seqused, int64_t max_q, int64_t max_k, bool causal,
                  std::optional<double> scale, std::optional<c10::SymInt> wl,
                  std::optional<c10::SymInt> wr) {
  a->batch = f.batch;
  a->heads = f.heads;
  a->kv_heads = f.kv_heads;
  a->e = f.e;
  a->ev = f.ev;
  a->lq = f.varlen ? max_q : q.size(1);
  a->lk = f.varlen ? max_k : k.size(1);
  a->q = q.const_data_ptr<float>();
  a->k = k.const_data_ptr<float>();
  a->v = v.const_data_ptr<float>();
  flash_strides(q, f.varlen, a->sq);
  flash_strides(k, f.varlen, a->sk);
  flash_strides(v, f.varlen, a->sv);
  a->causal = causal;
  a->bottom_right = 1;
  int64_t left = wl.has_value() ? wl->guard_int(__FILE__, __LINE__) : -1;
  int64_t right = wr.has_value() ? wr->guard_int(__FILE__, __LINE__) : -1;
  a->windowed = left >= 0 || right >= 0;
  a->wl = left;
  a->wr = right;
  a->scale =
      static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(a->e)));
  if (f.varlen) {
    a->cu_q = cu_q.const_data_ptr<int32_t>();
    a->cu_k = cu_k.const_data_ptr<int32_t>();
    a->lse_total = f.total_q;
    if (seqused.defined()) a->seqused_k = seqused.const_data_ptr<int32_t>();
  }
}

// The kernel's longest lengths: max_q / max_k bound the task grid, so they
// must cover every sequence (checked, as they decide what is computed).
void check_max(const at::Tensor &cu, int64_t max, const char *name) {
  at::Tensor h = cu.cpu();
  const int32_t *c = h.const_data_ptr<int32_t>();
  int64_t longest = 0;
  for (int64_t i = 1; i < h.size(0); i++) longest = std::max<int64_t>(longest, c[i] - c[i - 1]);
  TORCH_CHECK(max >= longest, name, " = ", max, " is shorter than the longest sequence (", longest,
              ")");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> flash_attention_forward(
    const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
    const std::optional<at::Tensor> &cum_seq_q, const std::optional<at::Tensor> &cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, bool return_debug_mask,
    std::optional<double> scale, std::optional<c10::SymInt> window_size_left,
    std::optional<c10::SymInt> window_size_right, const std::optional<at::Tensor> &seqused_k,
    const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &block_table,
    std::optional<int64_t> num_splits) {
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0,
                              "flash attention on neuron: dropout is not computed; use "
                              "scaled_dot_product_attention, whose math path applies it");
  TORCH_CHECK_NOT_IMPLEMENTED(!alibi_slopes.has_value() || !alibi_slopes->defined(),
                              "flash attention on neuron: alibi_slopes are not supported");
  TORCH_CHECK_NOT_IMPLEMENTED(!block_table.has_value() || !block_table->defined(),
                              "flash attention on neuron: paged keys (block_table) are not "
                              "supported; gather the pages into packed keys");
  FlashShape f = flash_shape(query, key, value, cum_seq_q, cum_seq_k);
  at::Tensor cu_q, cu_k, used;
  int64_t mq = max_q.guard_int(__FILE__, __LINE__), mk = max_k.guard_int(__FILE__, __LINE__);
  if (f.varlen) {
    cu_q = cum_seq_q->contiguous();
    cu_k = cum_seq_k->contiguous();
    check_max(cu_q, mq, "max_q");
    if (seqused_k.has_value() && seqused_k->defined()) {
      used = seqused_k->contiguous();
      TORCH_CHECK(used.scalar_type() == at::kInt && used.dim() == 1 && used.size(0) == f.batch,
                  "seqused_k must be int32 with one entry per sequence (", f.batch, ")");
      at::Tensor uh = used.cpu(), kh = cu_k.cpu();
      const int32_t *u = uh.const_data_ptr<int32_t>(), *c = kh.const_data_ptr<int32_t>();
      for (int64_t b = 0; b < f.batch; b++)
        TORCH_CHECK(u[b] >= 0 && u[b] <= c[b + 1] - c[b], "seqused_k[", b, "] = ", u[b],
                    " is outside [0, ", c[b + 1] - c[b], "], the keys of sequence ", b);
    } else {
      check_max(cu_k, mk, "max_k");
    }
  }
  at::Tensor q = as_f32(query), k = as_f32(key), v = as_f32(value);
  // output: the query's layout with the value's head dim, as CUDA's
  std::vector<int64_t> osize = query.sizes().vec();
  osize.back() = f.ev;
  at::Tensor out = f.varlen ? at::zeros(osize, query.options().dtype(at::kFloat))
                            : at::empty(osize, query.options().dtype(at::kFloat));
  at::Tensor lse = f.varlen ? at::full({f.heads, f.total_q}, INFINITY, q.options())
                            : at::empty({f.batch, f.heads, query.size(1)}, q.options());
  tnk_sdpa_args_t a{};
  flash_common(&a, f, q, k, v, cu_q, cu_k, used, mq, mk, is_causal, scale, window_size_left,
               window_size_right);
  a.o = out.data_ptr<float>();
  a.lse = lse.data_ptr<float>();
  flash_strides(out, f.varlen, a.so);
  if (f.batch > 0 && a.lq > 0)
    launch_kernel<TNK_K_SDPA_FORWARD>(query.device().index(), a, "aten::_flash_attention_forward");
  // rows with no visible key: +inf, flash attention's value (-inf from the kernel)
  lse.masked_fill_(lse == -INFINITY, INFINITY);
  at::Tensor o = query.scalar_type() == at::kFloat ? out : out.to(query.scalar_type());
  at::Tensor rng = at::zeros({2}, query.options().dtype(at::kLong));
  at::Tensor unused = at::empty({0}, query.options());
  return {o, lse, rng, unused, at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor &grad_out, const at::Tensor &query, const at::Tensor &key,
    const at::Tensor &value, const at::Tensor &out, const at::Tensor &logsumexp,
    const at::Tensor &cum_seq_q, const at::Tensor &cum_seq_k, c10::SymInt max_q, c10::SymInt max_k,
    double dropout_p, bool is_causal, const at::Tensor &rng_state, const at::Tensor &unused,
    std::optional<double> scale, std::optional<c10::SymInt> window_size_left,
    std::optional<c10::SymInt> window_size_right) {
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0,
                              "flash attention on neuron: dropout is not computed");
  std::optional<at::Tensor> cq, ck;
  if (cum_seq_q.defined()) cq = cum_seq_q;
  if (cum_seq_k.defined()) ck = cum_seq_k;
  FlashShape f = flash_shape(query, key, value, cq, ck);
  int64_t mq = max_q.guard_int(__FILE__, __LINE__), mk = max_k.guard_int(__FILE__, __LINE__);
  at::Tensor cu_q, cu_k;
  if (f.varlen) {
    cu_q = cum_seq_q.contiguous();
    cu_k = cum_seq_k.contiguous();
    check_max(cu_q, mq, "max_q");
    check_max(cu_k, mk, "max_k");
  }
  at::Tensor q = as_f32(query), k = as_f32(key), v = as_f32(value);
  at::Tensor go = as_f32(grad_out), o = as_f32(out);
  at::Tensor lse = logsumexp.to(at::kFloat).contiguous();
  auto f32 = query.options().dtype(at::kFloat);
  // every row written: rows outside all sequences stay zero
  at::Tensor gq = at::zeros(query.sizes(), f32), gk = at::zeros(key.sizes(), f32),
             gv = at::zeros(value.sizes(), f32);
  tnk_sdpa_args_t a{};
  flash_common(&a, f, q, k, v, cu_q, cu_k, at::Tensor(), mq, mk, is_causal, scale, window_size_left,
               window_size_right);
  a.go = go.const_data_ptr<float>();
  a.o = const_cast<float *>(o.const_data_ptr<float>());
  a.lse = const_cast<float *>(lse.const_data_ptr<float>());
  a.gq = gq.data_ptr<float>();
  a.gk = gk.data_ptr<float>();
  a.gv = gv.data_ptr<float>();
  flash_strides(go, f.varlen, a.sgo);
  flash_strides(o, f.varlen, a.so);
  flash_strides(gq, f.varlen, a.sgq);
  flash_strides(gk, f.varlen, a.sgk);
  flash_strides(gv, f.varlen, a.sgv);
  if (f.batch > 0 && a.lq > 0)
    launch_kernel<TNK_K_SDPA_BACKWARD>(query.device().index(), a,
                                       "aten::_flash_attention_backward");
  auto back = [&](at::Tensor &g, const at::Tensor &like) {
    return like.scalar_type() == at::kFloat ? g : g.to(like.scalar_type());
  };
  return {back(gq, query), back(gk, key), back(gv, value)};
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
  m.impl("_flash_attention_forward", flash_attention_forward);
  m.impl("_flash_attention_backward", flash_attention_backward);
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::neuron_sdp_choice);
}
