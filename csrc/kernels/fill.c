/* Fill a strided view with one scalar: the value is converted to the
 * destination dtype once, then replicated. */
#include <string.h>

#include "dtype.h"
#include "tnk.h"

typedef struct fill_ctx {
  tnk_shape_t shape;
  tnk_view_t dst;
  size_t esz;
  int zero; /* every byte of value is 0 */
  unsigned char value[16];
} fill_ctx_t;

/* n elements of esz bytes, `stride` elements apart: typed stores the
 * compiler vectorises (a per-element memcpy of a run-time size is a call per
 * element), memset when the value's bytes are all zero. */
static void fill_elems(char *base, int64_t n, int64_t stride, const unsigned char *value,
                       size_t esz, int zero) {
  if (stride == 1 && zero) {
    memset(base, 0, (size_t)n * esz);
    return;
  }
#define FILL_T(T)                                    \
  {                                                  \
    T v;                                             \
    memcpy(&v, value, sizeof v);                     \
    T *d = (T *)base;                                \
    if (stride == 1)                                 \
      for (int64_t i = 0; i < n; i++) d[i] = v;      \
    else                                             \
      for (int64_t i = 0; i < n; i++) d[i * stride] = v; \
    return;                                          \
  }
  switch (esz) {
    case 1: FILL_T(uint8_t)
    case 2: FILL_T(uint16_t)
    case 4: FILL_T(uint32_t)
    case 8: FILL_T(uint64_t)
    default:
      for (int64_t i = 0; i < n; i++) memcpy(base + i * stride * (int64_t)esz, value, esz);
  }
#undef FILL_T
}

static void fill_range(void *p, int64_t begin, int64_t end) {
  const fill_ctx_t *c = p;
  const tnk_shape_t *sh = &c->shape;
  int nd = sh->ndim;
  int64_t inner = sh->sizes[nd - 1], is = c->dst.strides[nd - 1];
  for (int64_t r = begin; r < end; r++) {
    int64_t rem = r, off = 0;
    for (int d = nd - 2; d >= 0; d--) {
      off += (rem % sh->sizes[d]) * c->dst.strides[d];
      rem /= sh->sizes[d];
    }
    char *base = (char *)c->dst.data + off * (int64_t)c->esz;
    fill_elems(base, inner, is, c->value, c->esz, c->zero);
  }
}

void tnk_fill(const tnk_fill_args_t *a) {
  fill_ctx_t c = {.shape = a->shape, .dst = a->dst};
  tnk_coalesce(&c.shape, &c.dst, 1);
  if (tnk_numel(&c.shape) == 0) return;
  if (c.shape.ndim == 0) {
    c.shape.ndim = 1;
    c.shape.sizes[0] = 1;
    c.dst.strides[0] = 1;
  }
  c.esz = tnk_dtype_size(c.dst.dtype);
  tnk_val_t v = {a->value.f, a->value.fi, a->value.i, a->value.is_integral};
  if (a->value.is_bool) v = (tnk_val_t){(double)a->value.i, 0, a->value.i, 1};
  char buf[16];
  switch (c.dst.dtype) {
#define STORE_CASE(E, N) \
  case E: tnk_store_##N(buf, v); break;
    TNK_FOR_EACH_DTYPE(STORE_CASE)
#undef STORE_CASE
    default: return;
  }
  memcpy(c.value, buf, c.esz);
  c.zero = 1;
  for (size_t k = 0; k < c.esz; k++) c.zero &= c.value[k] == 0;
  int64_t rows = tnk_numel(&c.shape) / c.shape.sizes[c.shape.ndim - 1];
  if (rows == 1 && c.dst.strides[0] == 1 && c.shape.ndim == 1) {
    /* contiguous: split the row itself */
    fill_ctx_t *cp = &c;
    int64_t n = c.shape.sizes[0];
    c.shape.ndim = 2;
    c.shape.sizes[1] = 4096;
    c.shape.sizes[0] = n / 4096;
    c.dst.strides[1] = 1;
    c.dst.strides[0] = 4096;
    if (c.shape.sizes[0]) tnk_parallel_for(c.shape.sizes[0], 64, fill_range, cp);
    int64_t done = c.shape.sizes[0] * 4096;
    fill_elems((char *)c.dst.data + done * (int64_t)c.esz, n - done, 1, c.value, c.esz, c.zero);
    return;
  }
  tnk_parallel_for(rows, 64, fill_range, &c);
}
