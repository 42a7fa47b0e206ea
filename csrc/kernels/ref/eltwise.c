/* The element-wise loops compiled for the baseline ISA: eltwise_loops.h. */
#define _GNU_SOURCE /* lgammaf_r / lgamma_r: lgamma without the global signgam */
#define TNK_ELTWISE_LOOPS tnk_eltwise_loops_ref
#include "eltwise_loops.h"
