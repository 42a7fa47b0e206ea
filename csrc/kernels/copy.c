/* Strided copy with dtype conversion: one inner-loop function per
 * (source, destination) dtype pair, generated from dtype.h, and a memcpy path
 * when nothing needs converting. Parallel over rows of the coalesced shape. */
#include "config.h"
#include "dtype.h"
#include "iter.h"
#include "tnk.h"
#include "vmath.h"

typedef void (*cvt_fn)(char *d, int64_t ds, const char *s, int64_t ss, int64_t n);

#define CVT_FN(SE, SN, DE, DN)                                                             \
  static void cvt_##SN##_##DN(char *d, int64_t ds, const char *s, int64_t ss, int64_t n) { \
    for (int64_t i = 0; i < n; i++) tnk_store_##DN(d + i * ds, tnk_load_##SN(s + i * ss)); \
  }
// clang-format off
#define CVT_ROW(SE, SN) \
  CVT_FN(SE, SN, TNK_BOOL, bool) \
  CVT_FN(SE, SN, TNK_U8, tnk_u8) \
  CVT_FN(SE, SN, TNK_I8, tnk_i8) \
  CVT_FN(SE, SN, TNK_I16, tnk_i16) \
  CVT_FN(SE, SN, TNK_I32, tnk_i32) \
  CVT_FN(SE, SN, TNK_I64, tnk_i64) \
  CVT_FN(SE, SN, TNK_F16, f16) \
  CVT_FN(SE, SN, TNK_BF16, bf16) \
  CVT_FN(SE, SN, TNK_F32, f32) \
  CVT_FN(SE, SN, TNK_F64, f64) \
  CVT_FN(SE, SN, TNK_C64, c64) \
  CVT_FN(SE, SN, TNK_C128, c128)
// clang-format on
TNK_FOR_EACH_DTYPE(CVT_ROW)

#define CVT_ENTRY(SN, DE, DN) [DE] = cvt_##SN##_##DN,
#define CVT_TABLE_ROW(SE, SN)                                                     \
  [SE] = {CVT_ENTRY(SN, TNK_BOOL, bool) CVT_ENTRY(SN, TNK_U8, tnk_u8)             \
              CVT_ENTRY(SN, TNK_I8, tnk_i8) CVT_ENTRY(SN, TNK_I16, tnk_i16)       \
                  CVT_ENTRY(SN, TNK_I32, tnk_i32) CVT_ENTRY(SN, TNK_I64, tnk_i64) \
                      CVT_ENTRY(SN, TNK_F16, f16) CVT_ENTRY(SN, TNK_BF16, bf16)   \
                          CVT_ENTRY(SN, TNK_F32, f32) CVT_ENTRY(SN, TNK_F64, f64) \
                              CVT_ENTRY(SN, TNK_C64, c64) CVT_ENTRY(SN, TNK_C128, c128)},
static const cvt_fn k_cvt[TNK_DTYPE_COUNT][TNK_DTYPE_COUNT] = {TNK_FOR_EACH_DTYPE(CVT_TABLE_ROW)};

/* Contiguous fp32 <-> bf16 / fp16 (autocast's casts and mixed-precision
 * optimizers) take the configuration's vectorised loops; the generic table
 * converts through a double per element, 5-10x slower. */
typedef void (*cvt_contig_fn)(char *d, const char *s, int64_t n);

static void contig_f32_bf16(char *d, const char *s, int64_t n) {
  tnk_config()->loops->f32_to_bf16((uint16_t *)(void *)d, (const float *)(const void *)s, n);
}

static void contig_bf16_f32(char *d, const char *s, int64_t n) {
  tnk_config()->loops->bf16_to_f32((float *)(void *)d, (const uint16_t *)(const void *)s, n);
}

static void contig_f32_f16(char *d, const char *s, int64_t n) {
  tnk_config()->loops->f32_to_f16((uint16_t *)(void *)d, (const float *)(const void *)s, n);
}

static void contig_f16_f32(char *d, const char *s, int64_t n) {
  tnk_config()->loops->f16_to_f32((float *)(void *)d, (const uint16_t *)(const void *)s, n);
}

static cvt_contig_fn contig_cvt(int src, int dst) {
  if (src == TNK_F32 && dst == TNK_BF16) return contig_f32_bf16;
  if (src == TNK_BF16 && dst == TNK_F32) return contig_bf16_f32;
  if (src == TNK_F32 && dst == TNK_F16) return contig_f32_f16;
  if (src == TNK_F16 && dst == TNK_F32) return contig_f16_f32;
  return NULL;
}

typedef struct copy_ctx {
  cvt_fn fn;
  cvt_contig_fn contig; /* NULL: no contiguous fast path for the pair */
  int64_t ssz;
  int64_t dsz;
  int same;   /* same dtype; 2: and one element (strides 0): a memcpy too */
  int stream; /* large same-dtype copies: streaming stores (AVX-512) */
} copy_ctx_t;

/* A run of rows (a transpose's or a slice's copy) in one call: calling the
 * element loop per row, then memcpy, cost more than a 128-byte row's copy
 * (bf16 [4, 8, 256, 64] from a transposed view: 48-55 us, 31-33 in one
 * call, 25-35 for PyTorch CPU). Short rows of whole 16-byte words copy
 * inline. Copies larger than TNK_STREAM_BYTES go out with streaming stores,
 * as the large softmax/layer-norm outputs do (a 64 MiB clone 4.3 -> 3.15 ms,
 * about 140% of glibc memcpy between the same buffers). */
static void copy_rows(void *p, char **ptrs, const int64_t *s, const int64_t *s2, int64_t n,
                      int64_t rows) {
  const copy_ctx_t *c = p;
  char *d = ptrs[0];
  const char *src = ptrs[1];
  if (c->same == 2 || (c->same && s[0] == c->dsz && s[1] == c->dsz)) {
    int64_t bytes = n * c->dsz;
    if (c->stream) {
      for (int64_t r = 0; r < rows; r++, d += s2[0], src += s2[1])
        TNK_VM->copy_stream(d, src, bytes);
    } else if (bytes <= 256 && bytes % 16 == 0) {
      for (int64_t r = 0; r < rows; r++, d += s2[0], src += s2[1])
        for (int64_t o = 0; o < bytes; o += 16) __builtin_memcpy(d + o, src + o, 16);
    } else {
      for (int64_t r = 0; r < rows; r++, d += s2[0], src += s2[1]) memcpy(d, src, (size_t)bytes);
    }
  } else if (c->contig && s[0] == c->dsz && s[1] == c->ssz) {
    for (int64_t r = 0; r < rows; r++, d += s2[0], src += s2[1]) c->contig(d, src, n);
  } else {
    for (int64_t r = 0; r < rows; r++, d += s2[0], src += s2[1]) c->fn(d, s[0], src, s[1], n);
  }
}

/* One run (a chunk of a 1-D shape): a run of one row. */
static void copy_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  static const int64_t none[TNK_ITER_MAX_VIEWS];
  copy_rows(p, ptrs, s, none, n, 1);
}

void tnk_copy(const tnk_copy_args_t *a) {
  int64_t dsz = (int64_t)tnk_dtype_size(a->dst.dtype), ssz = (int64_t)tnk_dtype_size(a->src.dtype);
  tnk_iter_t it;
  int64_t n = tnk_iter_init_any_order(&it, &a->shape, 2, (tnk_view_t[]){a->dst, a->src},
                                      (int64_t[]){dsz, ssz});
  if (n == 0) return;
  copy_ctx_t c = {.fn = k_cvt[a->src.dtype][a->dst.dtype],
                  .contig = contig_cvt(a->src.dtype, a->dst.dtype),
                  .ssz = ssz,
                  .dsz = dsz,
                  .same = a->src.dtype == a->dst.dtype};
  if (c.same && n == 1) c.same = 2;
  c.stream = c.same && TNK_VM->copy_stream && n * dsz > TNK_STREAM_BYTES;
  it.rows_loop = copy_rows;
  tnk_iter_run(&it, 1 << 16, copy_loop, &c);
}

void tnk_copy_batch(const tnk_copy_batch_args_t *a) {
  for (int32_t i = 0; i < a->n && i < 3; i++) tnk_copy(&a->copy[i]);
}
