/* TorchNeuron collectives (tnccl): the ranks of one host over device memory
 * they all map (tnrt_mem_alloc_shared / tnrt_mem_import). C11, no torch
 * headers: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all_v,
 * barrier and point-to-point send / recv over a communicator; the c10d
 * backend (csrc/aten/distributed.cpp) and its inter-host path build on it.
 *
 * Each rank owns one shared segment: a control block of per-rank counters
 * and call descriptors (one cache line each) and two data slots. A collective runs in rounds of at
 * most one slot: every rank copies its part into its own slot and publishes
 * the round; then each rank reduces its 1/N share of the chunk reading every
 * peer's slot directly (reduce-scatter shape, all ranks working) into its
 * slot's result area and publishes that; then every rank copies the N reduced
 * shares from the peers' result areas into its output. Two slots alternate so
 * a rank may fill round k+1 while peers still read round k.
 *
 * That staged path is the latency path, and the only one for small
 * messages. Large ones (at least 256 KiB: ccl_internal.h's DIRECT_MIN, chosen by
 * measurement) take the direct path when they can, reading the peers'
 * device buffers in place as CUDA IPC / NCCL's P2P with registered buffers
 * do, with no copy through the slots: device memory the caching allocator
 * took from shared segments (tnrt_set_shared_segments, which the c10d
 * backend turns on for groups with more than one rank on this host) has a
 * handle (tnrt_mem_shared_handle). The call opens with an announce round:
 * each rank publishes its descriptor (the argument check below) and its
 * source buffer's handle, offset and generation, or that it has none (a
 * private buffer, host memory, tnccl_comm_set_direct(comm, 0)); every rank
 * sees the same announcements, so all choose the same path: direct when
 * every rank's buffer is shared (peers read or write it), else the staged
 * rounds follow. Peers' segments are mapped once
 * (tnrt_mem_import) and cached per peer, by handle, up to 64 (the least
 * recently used is unmapped), all dropped when the peer's generation
 * changes (it has released shared segments since) and at destroy.
 *   all_reduce: rank r reduces share r (1/N, whole cache lines) of every
 *     rank's buffer, rank order, into share r of its own (the only part of
 *     it that it writes, and that no peer reads, before the middle
 *     barrier); after that barrier it copies every share q from rank q's
 *     buffer;
 *   reduce_scatter: block r of every rank's input reduced into out (out
 *     may be private); all_gather: every rank's input copied from where it
 *     is (an input in place is the block no other rank writes); broadcast:
 *     every rank, the root too, copies its share (1/N, whole cache lines)
 *     of the root's buffer into every receiver's, a piece at a time;
 *   all_to_all_v: its count round is the announce round (it also carries
 *     every rank's send offsets and source); direct when some rank
 *     receives at least the threshold from its peers (the largest column
 *     sum of the count matrix, self excluded: every rank has the matrix)
 *     and every rank that sends a peer any bytes has a shared `in`; rank p
 *     then copies recv_bytes[q] from rank q's in + (q's send_off[p])
 *     straight into its out + recv_off[q] (out may be private);
 * and each ends with a barrier, so that no rank returns (its stream then
 * free to overwrite the buffer) while a peer still reads it. A rank that
 * cannot map a peer's buffer (out of mappings) makes every rank fail that
 * call (TNRT_ERR_INTERNAL, output unspecified); the communicator stays in
 * step.
 *
 * Point-to-point messages do not use the rounds: each rank's segment also
 * holds one outbox per peer (a ring of chunks, each carrying its byte count)
 * and its control block a sent and a consumed counter per peer, so a send
 * and its recv involve only their two ranks and interleave freely with the
 * collectives.
 *
 * Every rank calls the same collectives in the same order with the same
 * shape: the collective, and its count and dtype and op (all_reduce,
 * reduce_scatter), byte count and root (broadcast), byte count
 * (all_gather). The first round of every collective call checks this: each
 * rank publishes a descriptor of its call with that round's data and
 * compares every peer's with its own once their data is there (no extra
 * round). On any difference, or when a rank's own checks reject its
 * arguments (an unsupported dtype, a root out of range, a NULL buffer),
 * every rank returns TNRT_ERR_INVALID_ARGUMENT from that call, before any
 * data reaches a buffer, with a message naming the ranks and their
 * arguments; the other ranks' message names a rank whose arguments were
 * rejected, that rank's says why. The ranks have then all abandoned the
 * same round, so the communicator stays usable: the next collective runs
 * normally. (The check cannot see calls that pair up wrongly with equal
 * shapes, e.g. a rank that skipped an all_reduce of the same size.)
 *
 * Every wait is bounded by the communicator's timeout (a p2p batch's from
 * its last progress): it spins for the first microseconds, then yields, then
 * sleeps in growing steps of at most 100 us so a rank waiting long for a
 * peer does not hold a core. After a timeout (TNRT_ERR_NOT_READY) the
 * communicator's ranks are out of step: destroy it. One thread at a time
 * calls a communicator's functions. */
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
/* Whether this rank offers its buffers to the direct path (default on;
 * TORCH_NEURONX_CCL_DIRECT=0 at init turns it off): a rank with it off
 * publishes no buffer, so every rank of its calls takes the staged path.
 * It may differ between ranks. */
void tnccl_comm_set_direct(tnccl_comm_t *comm, int on);
/* A direct call whose buffers, summed over the ranks, reach `bytes` writes
 * the copies into other buffers with non-temporal stores (past the cache).
 * Default: the host's last-level cache size. 0 streams every direct copy
 * (the tests), SIZE_MAX none. */
void tnccl_comm_set_stream_min(tnccl_comm_t *comm, size_t bytes);
/* Collective calls of this rank that took the direct path so far. */
uint64_t tnccl_comm_direct_calls(const tnccl_comm_t *comm);
int tnccl_comm_size(const tnccl_comm_t *comm);

/* In place over `count` elements of dtype (tnk_dtype_t values: floating,
 * integer and bool dtypes; bitwise ops on integer and bool dtypes only).
 * bf16 / fp16 reduce as PyTorch does on CPU: converted to fp32, combined in
 * rank order in fp32 (AVG: the sum divided by the rank count in fp32) and
 * rounded to the half type once, to nearest even. AVG of an integer dtype
 * truncates. Synchronous: the caller runs it where the buffer's producers
 * have finished (a device task on the communication stream).
 * TNRT_ERR_NOT_READY on a timeout (a peer died or never came);
 * TNRT_ERR_INVALID_ARGUMENT, on every rank, for mismatched or invalid
 * arguments (above). */
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

/* All-to-all with uneven splits (byte offsets and counts, nranks entries
 * each): this rank sends send_bytes[p] bytes from in + send_off[p] to rank p
 * and receives recv_bytes[p] bytes from rank p into out + recv_off[p]; p ==
 * rank is a local copy. Zero counts are allowed (in / out may then be NULL
 * when all are zero). in and out must not overlap. Every rank calls it: the
 * ranks first exchange their count vectors (one round), so a rank whose
 * send_bytes[p] differs from rank p's recv_bytes[rank], or whose arguments
 * are invalid, makes every rank return TNRT_ERR_INVALID_ARGUMENT without
 * moving data (the communicator stays usable, as for the other
 * collectives' argument check). That round also carries each rank's send
 * offsets and whether its in is shared device memory: when some rank
 * receives at least 256 KiB from its peers and every rank that sends to a
 * peer has a shared in, every rank reads its peers' in directly (the
 * direct path, above: no more rounds, then a barrier; out may be private).
 * Otherwise ceil(max count / region) rounds follow, a region being the
 * 1/nranks of a slot each rank fills for one destination. */
tnrt_status_t tnccl_all_to_all_v(tnccl_comm_t *comm, const void *in, const size_t *send_off,
                                 const size_t *send_bytes, void *out, const size_t *recv_off,
                                 const size_t *recv_bytes);

/* ---- point-to-point ----
 * A send and its recv pair up in order: the messages from one rank to
 * another are FIFO. Only the two ranks take part; the others and the
 * collective rounds are unaffected. */
typedef struct tnccl_p2p {
  int peer;    /* the rank sent to or received from */
  int is_send; /* nonzero: send buf's bytes to peer; zero: receive bytes from peer into buf */
  void *buf;
  size_t bytes;
} tnccl_p2p_t;

/* Runs a batch of sends and receives to completion, progressing all of them
 * together: two ranks that each send to and receive from the other in one
 * batch never deadlock, whatever the sizes. The ops with the same peer and
 * direction run in batch order. A send completes when its last chunk is in
 * this rank's outbox (up to 256 KiB may complete before the peer receives).
 * A send to this rank itself pairs with a recv from itself in the same batch
 * (the k-th send with the k-th recv, a copy). Errors:
 * TNRT_ERR_INVALID_ARGUMENT, nothing run, for a bad peer or buffer or a send
 * to self without its recv in the batch (or of another size); for a recv
 * whose peer sends a message of another size the recv discards that message
 * and fails with TNRT_ERR_INVALID_ARGUMENT once the rest of the batch has
 * run (the channel stays in step; the sender is not told);
 * TNRT_ERR_NOT_READY when no op progressed for the timeout. */
tnrt_status_t tnccl_p2p_batch(tnccl_comm_t *comm, const tnccl_p2p_t *ops, int n);
/* A batch of one send / one recv. */
tnrt_status_t tnccl_send(tnccl_comm_t *comm, const void *buf, size_t bytes, int peer);
tnrt_status_t tnccl_recv(tnccl_comm_t *comm, void *buf, size_t bytes, int peer);

#ifdef __cplusplus
}
#endif
#endif
