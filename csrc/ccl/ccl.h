/* TorchNeuron collectives (tnccl): the ranks of one host over device memory
 * they all map (tnrt_mem_alloc_shared / tnrt_mem_import). C11, no torch
 * headers. Work in progress (issue 13): all_reduce, broadcast and barrier
 * over a communicator; the c10d backend, the other collectives and the
 * inter-host path build on it.
 *
 * Each rank owns one shared segment: a control block of per-rank counters
 * (one cache line each) and two data slots. A collective runs in rounds of at
 * most one slot: every rank copies its part into its own slot and publishes
 * the round; then each rank reduces its 1/N share of the chunk reading every
 * peer's slot directly (reduce-scatter shape, all ranks working) into its
 * slot's result area and publishes that; then every rank copies the N reduced
 * shares from the peers' result areas into its output. Two slots alternate so
 * a rank may fill round k+1 while peers still read round k. Every wait is
 * bounded by the communicator's timeout. */
#ifndef TNCCL_H
#define TNCCL_H

#include <stddef.h>
#include <stdint.h>

#include "../runtime/tnrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tnccl_comm tnccl_comm_t;

/* The bootstrap exchange the caller provides (the c10d store in the
 * backend): every rank passes `bytes` of its own and receives all ranks'
 * in rank order. Returns 0 on success. */
typedef int (*tnccl_allgather_fn)(void *ctx, const void *mine, void *all, size_t bytes);

/* Collective ops (torch.distributed.ReduceOp). */
typedef enum tnccl_op {
  TNCCL_SUM = 0,
  TNCCL_PRODUCT,
  TNCCL_MIN,
  TNCCL_MAX,
  TNCCL_BAND,
  TNCCL_BOR,
  TNCCL_BXOR,
  TNCCL_AVG,
} tnccl_op_t;

/* Creates this rank's communicator on `device`; every rank of the group
 * calls it with the same nranks. timeout_ms bounds every wait. */
tnrt_status_t tnccl_comm_init(int device, int rank, int nranks, int64_t timeout_ms,
                              tnccl_allgather_fn exchange, void *ctx, tnccl_comm_t **out);
void tnccl_comm_destroy(tnccl_comm_t *comm);
int tnccl_comm_rank(const tnccl_comm_t *comm);
int tnccl_comm_size(const tnccl_comm_t *comm);

/* In place over `count` elements of dtype (tnk_dtype_t values: floating,
 * integer and bool dtypes; half types reduce in fp32). Synchronous: the
 * caller runs it where the buffer's producers have finished (a device task
 * on the communication stream). TNRT_ERR_NOT_READY on a timeout (a peer
 * died or never came). */
tnrt_status_t tnccl_all_reduce(tnccl_comm_t *comm, void *buf, int64_t count, int dtype,
                               tnccl_op_t op);
tnrt_status_t tnccl_broadcast(tnccl_comm_t *comm, void *buf, size_t bytes, int root);
/* out (nranks * bytes) = every rank's `bytes` of in, in rank order; in may be
 * out + rank * bytes (in place). */
tnrt_status_t tnccl_all_gather(tnccl_comm_t *comm, const void *in, void *out, size_t bytes);
/* out (count elements) = op over ranks of block `rank` of in (nranks * count
 * elements); in and out must not overlap. */
tnrt_status_t tnccl_reduce_scatter(tnccl_comm_t *comm, const void *in, void *out, int64_t count,
                                   int dtype, tnccl_op_t op);
tnrt_status_t tnccl_barrier(tnccl_comm_t *comm);

#ifdef __cplusplus
}
#endif
#endif
