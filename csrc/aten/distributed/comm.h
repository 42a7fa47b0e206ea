// The communicator of a process group: where its ranks run (Hosts: this
// host's ranks through csrc/ccl, the hosts through Gloo), the Comm with its
// stream and failure state, the queued collective (Job) and the conversions
// between c10d's and ccl's types.
// Part of distributed.cpp's one translation unit, included there only, in
// order (comm.h, work.h, process_group.h, ipc.h): the c10d and pybind
// headers are compiled once (a torch-header unit costs about a minute on two
// cores), the parts are cut by concern.
#pragma once

namespace torch_neuronx {
// A message for tnrt_stream_fault, which keeps the pointer: interned for the
// process's lifetime (compiled.cpp).
const char *intern_message(const std::string &msg);

namespace {

bool blocking_wait() {
  static const bool on = [] {
    const char *v = std::getenv("TORCH_NEURONX_BLOCKING_WAIT");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

tnk_dtype_t tnk_dtype(at::ScalarType t) {
  bool ok;
  return to_tnk(t, &ok);
}

// Where the ranks of a group run: for each group rank the index of its host
// (hosts numbered by their first rank). On more than one host, the ranks of
// a host communicate through csrc/ccl and the hosts through PyTorch's Gloo
// between their leaders (each host's first rank), on the device buffers,
// which are host addressable; the operations without a hierarchical form run
// on a Gloo group of all ranks.
struct Hosts {
  std::vector<int> host_of;                   // host index of each group rank
  std::vector<int> local;                     // the group ranks on this host
  int local_rank = 0;                         // this rank's index among them
  c10::intrusive_ptr<c10d::Backend> leaders;  // Gloo among the leaders (on a leader)
  c10::intrusive_ptr<c10d::Backend> world;    // Gloo among all ranks
  int nhosts = 1;
  bool multi() const { return nhosts > 1; }
};

c10d::ReduceOp to_c10d(tnccl_op_t op) {
  switch (op) {
    case TNCCL_SUM:
    case TNCCL_AVG: return c10d::ReduceOp::SUM;
    case TNCCL_PRODUCT: return c10d::ReduceOp::PRODUCT;
    case TNCCL_MIN: return c10d::ReduceOp::MIN;
    case TNCCL_MAX: return c10d::ReduceOp::MAX;
    case TNCCL_BAND: return c10d::ReduceOp::BAND;
    case TNCCL_BOR: return c10d::ReduceOp::BOR;
    case TNCCL_BXOR: return c10d::ReduceOp::BXOR;
  }
  return c10d::ReduceOp::SUM;
}

// A CPU tensor over device memory, for Gloo. Only inside a collective's task:
// collectives are host code (require_host_code before each launch), and a
// task may dereference device memory (hal.h), where host code outside one
// may not unless the HAL says host_addressable.
at::Tensor host_view(const void *p, int64_t n, at::ScalarType t) {
  return at::from_blob(const_cast<void *>(p), {n}, at::TensorOptions().dtype(t));
}
at::Tensor host_bytes(const void *p, size_t n) {
  return host_view(p, static_cast<int64_t>(n), at::kByte);
}
void gloo_wait(const c10::intrusive_ptr<c10d::Work> &w) {
  if (w) w->wait();
}

// One communicator of a process group: the ccl communicator of this host's
// ranks, the Gloo groups across hosts, and the stream the group's
// collectives run on. Shared by the group and its queued tasks. Its
// collectives run on that stream's thread, one at a time.
struct Comm {
  tnccl_comm_t *c = nullptr;
  std::shared_ptr<Hosts> hosts;
  int rank = 0, size = 1;
  c10::DeviceIndex device = -1;
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(kNeuron, 0)};
  std::atomic<bool> broken{false};
  std::mutex mu;
  std::string error;  // the first failure
  ~Comm() { tnccl_comm_destroy(c); }
  void fail(const std::string &msg) {
    std::lock_guard<std::mutex> g(mu);
    if (error.empty()) error = msg;
    broken = true;
  }
  std::string failure() {
    std::lock_guard<std::mutex> g(mu);
    return error;
  }
  bool multi() const { return hosts && hosts->multi(); }
  bool leader() const { return hosts->local_rank == 0; }

  tnrt_status_t all_reduce(void *buf, int64_t count, at::ScalarType t, tnccl_op_t op) {
    if (!multi()) return tnccl_all_reduce(c, buf, count, tnk_dtype(t), op);
    // this host's ranks, then the leaders, then back to this host's ranks
    tnccl_op_t local = op == TNCCL_AVG ? TNCCL_SUM : op;
    tnrt_status_t st = tnccl_all_reduce(c, buf, count, tnk_dtype(t), local);
    if (st != TNRT_OK) return st;
    st = on_leader([&] {
      at::Tensor x = host_view(buf, count, t);
      // Gloo has no int16 or bool reductions: through int32 / uint8
      at::ScalarType g = t == at::kShort ? at::kInt : t == at::kBool ? at::kByte : t;
      std::vector<at::Tensor> v{g == t ? x : x.to(g)};
      c10d::AllreduceOptions o;
      o.reduceOp = to_c10d(op);
      gloo_wait(hosts->leaders->allreduce(v, o));
      if (op == TNCCL_AVG) {
        if (at::isFloatingType(t))
          v[0].div_(size);
        else
          v[0].copy_(at::div(v[0], size, "trunc"));
      }
      if (g != t) x.copy_(t == at::kBool ? v[0].ne(0) : v[0].to(t));
    });
    if (st != TNRT_OK) return st;
    return tnccl_broadcast(c, buf, static_cast<size_t>(count) * c10::elementSize(t), 0);
  }

  // Runs the leader's step across hosts, then tells this host's other
  // ranks whether it worked (they wait for the leader's data next: a
  // failure must not leave them waiting or reading what was not sent).
  template <typename F>
  tnrt_status_t on_leader(F step) {
    int32_t ok = 1;
    std::string why;
    if (leader()) {
      try {
        step();
      } catch (const std::exception &e) {
        ok = 0;
        why = e.what();
      }
    }
    tnrt_status_t st = tnccl_broadcast(c, &ok, sizeof ok, 0);
    if (st != TNRT_OK) return st;
    if (!ok) {
      if (leader()) throw std::runtime_error(why);
      throw std::runtime_error(c10::str("the step across hosts failed on this host's leader (rank ",
                                        hosts->local[0], "); its error names the cause"));
    }
    return TNRT_OK;
  }

  tnrt_status_t broadcast(void *buf, size_t bytes, int root) {
    if (!multi()) return tnccl_broadcast(c, buf, bytes, root);
    const Hosts &h = *hosts;
    int root_host = h.host_of[root], my_host = h.host_of[rank];
    tnrt_status_t st = TNRT_OK;
    if (my_host == root_host) {
      int local_root =
          static_cast<int>(std::find(h.local.begin(), h.local.end(), root) - h.local.begin());
      if ((st = tnccl_broadcast(c, buf, bytes, local_root)) != TNRT_OK) return st;
    }
    st = on_leader([&] {
      std::vector<at::Tensor> v{host_bytes(buf, bytes)};
      c10d::BroadcastOptions o;
      o.rootRank = root_host;
      gloo_wait(hosts->leaders->broadcast(v, o));
    });
    if (st != TNRT_OK) return st;
    if (my_host != root_host) st = tnccl_broadcast(c, buf, bytes, 0);
    return st;
  }

  tnrt_status_t all_gather(const void *in, void *out, size_t bytes) {
    if (!multi()) return tnccl_all_gather(c, in, out, bytes);
    std::vector<at::Tensor> o{host_bytes(out, bytes * size)}, i{host_bytes(in, bytes)};
    gloo_wait(hosts->world->_allgather_base(o[0], i[0]));
    return TNRT_OK;
  }

  tnrt_status_t reduce_scatter(const void *in, void *out, int64_t count, at::ScalarType t,
                               tnccl_op_t op) {
    if (!multi()) return tnccl_reduce_scatter(c, in, out, count, tnk_dtype(t), op);
    // the whole input reduced (hierarchically), then this rank's block
    size_t esz = c10::elementSize(t), n = static_cast<size_t>(count) * esz;
    std::vector<char> tmp(n * size);
    std::memcpy(tmp.data(), in, tmp.size());
    tnrt_status_t st = all_reduce(tmp.data(), count * size, t, op);
    if (st == TNRT_OK) std::memcpy(out, tmp.data() + n * rank, n);
    return st;
  }

  tnrt_status_t all_to_all_v(const void *in, const size_t *so, const size_t *sb, void *out,
                             const size_t *ro, const size_t *rb) {
    if (!multi()) return tnccl_all_to_all_v(c, in, so, sb, out, ro, rb);
    // Gloo's all_to_all takes splits of one dtype: bytes, packed as given
    size_t in_total = 0, out_total = 0;
    std::vector<int64_t> ins(size), outs(size);
    for (int r = 0; r < size; r++) {
      TORCH_CHECK(so[r] == in_total && ro[r] == out_total, "all_to_all: blocks must be packed");
      in_total += sb[r];
      out_total += rb[r];
      ins[r] = static_cast<int64_t>(sb[r]);
      outs[r] = static_cast<int64_t>(rb[r]);
    }
    at::Tensor i = host_bytes(in, in_total), o = host_bytes(out, out_total);
    gloo_wait(hosts->world->alltoall_base(o, i, outs, ins));
    return TNRT_OK;
  }

  tnrt_status_t p2p_batch(const tnccl_p2p_t *ops, int n) {
    if (!multi()) return tnccl_p2p_batch(c, ops, n);
    // all posted before any wait: an exchange in one batch cannot deadlock
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int k = 0; k < n; k++) {
      std::vector<at::Tensor> v{host_bytes(ops[k].buf, ops[k].bytes)};
      works.push_back(ops[k].is_send ? hosts->world->send(v, ops[k].peer, 0)
                                     : hosts->world->recv(v, ops[k].peer, 0));
    }
    for (auto &w : works) gloo_wait(w);
    return TNRT_OK;
  }

  tnrt_status_t barrier() {
    if (!multi()) return tnccl_barrier(c);
    tnrt_status_t st = tnccl_barrier(c);
    if (st != TNRT_OK) return st;
    return on_leader([&] { gloo_wait(hosts->leaders->barrier()); });
  }
};

// How one (or a batch of) queued collective(s) ended.
struct Completion {
  tnrt_event_t *end = nullptr;
  std::mutex mu;
  std::string error;
  ~Completion() { tnrt_event_destroy(end); }
  std::string failure() {
    std::lock_guard<std::mutex> g(mu);
    return error;
  }
};

using Body = std::function<tnrt_status_t(Comm &)>;

struct Job {
  std::shared_ptr<Comm> comm;
  std::shared_ptr<Completion> done;
  Body body;
  tnrt_stream_t *stream;
  uint32_t origin;
  const char *name;
};

void run_job(void *p) {
  std::unique_ptr<Job> j(*static_cast<Job **>(p));
  std::string msg;
  if (j->comm->broken) {
    msg = "a previous collective of this process group failed (" + j->comm->failure() +
          "); the group cannot be used any more: destroy it and create a new one";
  } else {
    tnrt_status_t st = TNRT_ERR_INTERNAL;
    try {
      st = j->body(*j->comm);
      if (st != TNRT_OK)
        msg = std::string("neuron collective ") + j->name + " failed: " + tnrt_last_error();
    } catch (const std::exception &e) {
      msg = std::string("neuron collective ") + j->name + " failed: " + e.what();
    }
    // Arguments that differ across ranks: every rank of the host stopped in
    // the same round with nothing moved (csrc/ccl checks them), so the group
    // stays usable. Anything else (a timeout, a failure across hosts) leaves
    // the ranks out of step: the group is done.
    if (!msg.empty() && !(st == TNRT_ERR_INVALID_ARGUMENT && !j->comm->multi())) j->comm->fail(msg);
  }
  if (!msg.empty()) {
    {
      std::lock_guard<std::mutex> g(j->done->mu);
      if (j->done->error.empty()) j->done->error = msg;
    }
    tnrt_stream_fault(j->stream, TNRT_FAULT_MESSAGE, intern_message(msg), 0, 0, j->origin);
  }
}

tnccl_op_t to_ccl(const c10d::ReduceOp &op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return TNCCL_SUM;
    case c10d::ReduceOp::AVG: return TNCCL_AVG;
    case c10d::ReduceOp::PRODUCT: return TNCCL_PRODUCT;
    case c10d::ReduceOp::MIN: return TNCCL_MIN;
    case c10d::ReduceOp::MAX: return TNCCL_MAX;
    case c10d::ReduceOp::BAND: return TNCCL_BAND;
    case c10d::ReduceOp::BOR: return TNCCL_BOR;
    case c10d::ReduceOp::BXOR: return TNCCL_BXOR;
    case c10d::ReduceOp::PREMUL_SUM: return TNCCL_SUM;  // the factor is applied first
    default: break;
  }
  TORCH_CHECK_VALUE(false, "the neuron backend does not support reduce op ", int(op.op_));
}

at::ScalarType ccl_dtype(const at::Tensor &t) {
  tnk_dtype_t d = tnk_of(t);
  TORCH_CHECK_VALUE(d != TNK_DTYPE_COUNT && d != TNK_C64 && d != TNK_C128,
                    "the neuron backend does not support tensors of dtype ", t.scalar_type(),
                    " in reductions");
  return t.scalar_type();
}

char *ptr(const at::Tensor &t) { return static_cast<char *>(t.data_ptr()); }

// The supplement of PREMUL_SUM as a scalar multiplier, applied to the input
// before a SUM.
at::Tensor premul(const at::Tensor &t, const c10d::ReduceOp &op, bool in_place) {
  auto *s = dynamic_cast<c10d::PreMulSumSupplement *>(op.supplement_.get());
  TORCH_CHECK_VALUE(s, "PREMUL_SUM needs a factor (torch.distributed._make_nccl_premul_sum)");
  if (s->tensor_factor.defined()) {
    auto f = s->tensor_factor.to(t.device(), t.scalar_type());
    return in_place ? t.mul_(f) : t.mul(f);
  }
  return in_place ? t.mul_(s->double_factor) : t.mul(s->double_factor);
}

}  // namespace
}  // namespace torch_neuronx
