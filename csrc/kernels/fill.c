/* Fill a strided view with one scalar: the value is converted to the
 * destination dtype once, then replicated. */
#include <string.h>

#include "dtype.h"
#include "iter.h"
#include "tnk.h"

typedef struct fill_ctx {
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
#define FILL_T(T)                                        \
  {                                                      \
    T v;                                                 \
    memcpy(&v, value, sizeof v);                         \
    T *d = (T *)base;                                    \
    if (stride == 1)                                     \
      for (int64_t i = 0; i < n; i++) d[i] = v;          \
    else                                                 \
      for (int64_t i = 0; i < n; i++) d[i * stride] = v; \
    return;                                              \
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

static void fill_loop(void *p, char **ptrs, const int64_t *s, int64_t n, int64_t index) {
  const fill_ctx_t *c = p;
  fill_elems(ptrs[0], n, s[0] / (int64_t)c->esz, c->value, c->esz, c->zero);
}

void tnk_fill(const tnk_fill_args_t *a) {
  fill_ctx_t c = {.esz = tnk_dtype_size(a->dst.dtype)};
  tnk_iter_t it;
  if (!c.esz || !tnk_iter_init_any_order(&it, &a->shape, 1, &a->dst, (int64_t[]){(int64_t)c.esz}))
    return;
  tnk_val_t v = {a->value.f, a->value.fi, a->value.i, a->value.is_integral};
  if (a->value.is_bool) v = (tnk_val_t){(double)a->value.i, 0, a->value.i, 1};
  char buf[16];
  tnk_store_any(buf, a->dst.dtype, v); /* a valid dtype: esz > 0 */
  memcpy(c.value, buf, c.esz);
  c.zero = 1;
  for (size_t k = 0; k < c.esz; k++) c.zero &= c.value[k] == 0;
  /* 64 rows a task whatever their length; one dimension in chunks of 64
   * rows of 4096 */
  it.row_grain = 64;
  tnk_iter_run(&it, 64 * 4096, fill_loop, &c);
}
