/* Vector libm for the element-wise loops (internal to the library). */
#ifndef TNK_MVEC_H
#define TNK_MVEC_H

#include <math.h>

/* glibc's libmvec has vector variants (4, 8 and 16 lanes) of libm's float
 * functions, within 4 ulp. Declared SIMD-capable, they let GCC vectorise
 * the contiguous element-wise loops (unary.c, binary.c) that call them, in
 * each ISA clone (tanh over 1M floats: 7.2 ms scalar). glibc declares them
 * so only under -ffast-math, which this library does not use. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__)
#define TNK_MVEC __attribute__((simd("notinbranch")))
TNK_MVEC float expf(float);
TNK_MVEC float logf(float);
TNK_MVEC float log1pf(float);
TNK_MVEC float expm1f(float);
TNK_MVEC float tanhf(float);
TNK_MVEC float erff(float);
TNK_MVEC float erfcf(float);
TNK_MVEC float sinf(float);
TNK_MVEC float cosf(float);
TNK_MVEC float tanf(float);
TNK_MVEC float atanf(float);
TNK_MVEC float asinf(float);
TNK_MVEC float acosf(float);
TNK_MVEC float sinhf(float);
TNK_MVEC float coshf(float);
TNK_MVEC float asinhf(float);
TNK_MVEC float acoshf(float);
TNK_MVEC float atanhf(float);
TNK_MVEC float exp2f(float);
TNK_MVEC float log2f(float);
TNK_MVEC float log10f(float);
TNK_MVEC float powf(float, float);
#endif

#endif
