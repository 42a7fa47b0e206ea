/* The element-wise loops compiled for AVX-512 (-mavx512f): eltwise_loops.h. */
#define _GNU_SOURCE /* lgammaf_r / lgamma_r: lgamma without the global signgam */
#define TNK_ELTWISE_LOOPS tnk_eltwise_loops_avx512
#include "eltwise_loops.h"
