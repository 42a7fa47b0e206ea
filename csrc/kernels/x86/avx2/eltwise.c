/* The element-wise loops compiled for AVX2+FMA (-mavx2 -mfma): eltwise_loops.h. */
#define _GNU_SOURCE /* lgammaf_r / lgamma_r: lgamma without the global signgam */
#define TNK_ELTWISE_LOOPS tnk_eltwise_loops_avx2
#include "eltwise_loops.h"
