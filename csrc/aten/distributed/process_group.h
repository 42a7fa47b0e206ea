// ProcessGroupNeuron, the c10d::Backend: collectives, point-to-point,
// coalescing, splitting, and their checks.
// Part of distributed.cpp's one translation unit, included there only, in
// order (comm.h, work.h, process_group.h, ipc.h): the c10d and pybind
// headers are compiled once (a torch-header unit costs about a minute on two
// cores), the parts are cut by concern.
#pragma once

namespace torch_neuronx {

class ProcessGroupNeuron : public c10d::Backend {
 public:
  // hosts: where the ranks run (null: all on this host).
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::chrono::milliseconds timeout, std::string group_id,
                     std::shared_ptr<Hosts> hosts = nullptr)
      : Backend(rank, size),
        store_(std::move(store)),
        timeout_(timeout),
        group_id_(std::move(group_id)),
        hosts_(std::move(hosts)) {}

  const std::string getBackendName() const override { return "neuron"; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  bool supportsCoalescing() const override { return true; }
  // split_group / DeviceMesh: a member's new group bootstraps its own
  // communicator on first use, among the members only, so a split needs no
  // collective of the parent (a non-member has nothing to do).
  // (a group across hosts is made by new_group, which sets its Gloo groups up)
  bool supportsSplitting() const override { return !(hosts_ && hosts_->multi()); }
  // How many of this rank's collectives took ccl's direct path (read in
  // place, no staging) so far; for tests, after a synchronisation.
  uint64_t direct_calls() {
    std::lock_guard<std::mutex> g(mu_);
    return comm_ && comm_->c ? tnccl_comm_direct_calls(comm_->c) : 0;
  }
  c10::intrusive_ptr<Options> getBackendOptions() override {
    return c10::make_intrusive<Options>("neuron", timeout_);
  }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store> &store,
                                          const std::vector<int> &ranks,
                                          const c10::intrusive_ptr<Options> &opts) override {
    // ProcessGroup::splitGroup calls this once per device type the group
    // serves (neuron and cpu) with the same store: one backend serves both
    if (last_split_store_ == store.get() && last_split_ranks_ == ranks) return last_split_;
    last_split_store_ = store.get();
    last_split_ranks_ = ranks;
    last_split_ = nullptr;
    // Every rank of this group splits, in the same order, so the count names
    // the split alike on all of them. (The store PyTorch passes is prefixed
    // with a group name that can differ between ranks when new_group was
    // called before: the bootstrap uses this group's store and that count.)
    uint64_t n = splits_++;
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return nullptr;
    last_split_ = c10::make_intrusive<ProcessGroupNeuron>(
        store_, static_cast<int>(it - ranks.begin()), static_cast<int>(ranks.size()),
        opts ? opts->timeout : timeout_, group_id_ + "/split" + std::to_string(n));
    last_split_->setBoundDeviceId(getBoundDeviceId());
    return last_split_;
  }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  // Gloo's monitored barrier over the store: rank 0 waits for every rank
  // within the timeout and names the ones that did not arrive.
  void monitoredBarrier(const c10d::BarrierOptions &o, bool wait_all_ranks) override {
    auto timeout = o.timeout == c10d::kUnsetTimeout ? timeout_ : o.timeout;
    std::string base =
        "tn_monitored_barrier/" + group_id_ + "/" + std::to_string(monitored_++) + "/";
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto left = [&] {
      auto l = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      return std::max(l, std::chrono::milliseconds(1));
    };
    if (rank_ != 0) {
      store_->set(base + std::to_string(rank_), std::vector<uint8_t>{1});
      try {
        store_->wait({base + "release"}, left());
      } catch (const std::exception &) {
        C10_THROW_ERROR(DistBackendError,
                        c10::str("[Rank ", rank_, "]: monitored_barrier: rank 0 did not release ",
                                 "the barrier within ", timeout.count(), " ms"));
      }
      auto v = store_->get(base + "release");
      if (!v.empty() && v[0] != 0)
        C10_THROW_ERROR(DistBackendError, std::string(v.begin() + 1, v.end()));
      return;
    }
    std::vector<int> missing;
    for (int r = 1; r < size_; r++) {
      try {
        store_->wait({base + std::to_string(r)},
                     missing.empty() ? left() : std::chrono::milliseconds(1));
      } catch (const std::exception &) {
        missing.push_back(r);
        if (!wait_all_ranks) break;
      }
    }
    std::string msg;
    if (!missing.empty()) {
      std::string list;
      for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
      msg = c10::str("[Rank 0]: Rank", missing.size() > 1 ? "s " : " ", list,
                     " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
    std::vector<uint8_t> v{static_cast<uint8_t>(msg.empty() ? 0 : 1)};
    v.insert(v.end(), msg.begin(), msg.end());
    store_->set(base + "release", v);
    if (!msg.empty()) C10_THROW_ERROR(DistBackendError, msg);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts,
                                           const c10d::BroadcastOptions &o) override {
    auto t = single(ts, "broadcast");
    check_root(o.rootRank, "broadcast");
    int root = static_cast<int>(o.rootRank);
    char *p = ptr(t);
    size_t n = t.nbytes();
    return run(c10d::OpType::BROADCAST, "broadcast", {t}, {t},
               [=](Comm &c) { return c.broadcast(p, n, root); });
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts,
                                           const c10d::AllreduceOptions &o) override {
    auto t = single(ts, "all_reduce");
    return allreduce_list({t}, o.reduceOp, c10d::OpType::ALLREDUCE, "all_reduce");
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor> &ts, const c10d::AllreduceCoalescedOptions &o) override {
    for (auto &t : ts) check_tensor(t, "all_reduce_coalesced");
    return allreduce_list(ts, o.reduceOp, c10d::OpType::ALLREDUCE_COALESCED,
                          "all_reduce_coalesced");
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                        const c10d::ReduceOptions &o) override {
    auto t = single(ts, "reduce");
    check_root(o.rootRank, "reduce");
    // every rank reduces a copy; the root keeps the result, the others their input
    at::Tensor src = t;
    if (o.reduceOp == c10d::ReduceOp::PREMUL_SUM) src = premul(t, o.reduceOp, false);
    auto tmp = at::empty_like(t);
    char *p = ptr(t), *s = ptr(src), *q = ptr(tmp);
    size_t n = t.nbytes();
    int64_t count = t.numel();
    at::ScalarType dt = ccl_dtype(t);
    int root = static_cast<int>(o.rootRank), me = rank_;
    tnccl_op_t op = to_ccl(o.reduceOp);
    return run(c10d::OpType::REDUCE, "reduce", {t, src, tmp}, {t}, [=](Comm &c) {
      std::memcpy(q, s, n);
      tnrt_status_t st = c.all_reduce(q, count, dt, op);
      if (st == TNRT_OK && me == root) std::memcpy(p, q, n);
      return st;
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs,
                                           std::vector<at::Tensor> &ins,
                                           const c10d::AllgatherOptions &) override {
    auto in = single(ins, "all_gather");
    TORCH_CHECK(outs.size() == 1, "all_gather takes one output list");
    auto &list = outs[0];
    check_list(list, in, "all_gather");
    return gather_into(list, in, c10d::OpType::ALLGATHER, "all_gather");
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                 const c10d::AllgatherOptions &) override {
    check_tensor(in, "all_gather_into_tensor");
    check_tensor(out, "all_gather_into_tensor");
    check_same(out, in, "all_gather_into_tensor");
    TORCH_CHECK_VALUE(out.numel() == in.numel() * size_, "all_gather_into_tensor: the output has ",
                      out.numel(), " elements; it must have world_size (", size_,
                      ") times the input's ", in.numel());
    char *src = ptr(in), *dst = ptr(out);
    size_t n = in.nbytes();
    return run(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {in, out}, {out},
               [=](Comm &c) { return c.all_gather(src, dst, n); });
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                     std::vector<at::Tensor> &ins,
                                                     const c10d::AllgatherOptions &) override {
    TORCH_CHECK(outs.size() == ins.size(), "all_gather_coalesced: ", outs.size(),
                " output lists for ", ins.size(), " inputs");
    std::vector<Body> bodies;
    std::vector<at::Tensor> keep, results;
    for (size_t i = 0; i < ins.size(); i++) {
      check_tensor(ins[i], "all_gather_coalesced");
      check_list(outs[i], ins[i], "all_gather_coalesced");
      bodies.push_back(gather_body(outs[i], ins[i], keep));
      results.insert(results.end(), outs[i].begin(), outs[i].end());
    }
    return run(c10d::OpType::ALLGATHER_COALESCED, "all_gather_coalesced", keep, results,
               sequence(std::move(bodies)));
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
      const c10d::AllgatherOptions &o) override {
    TORCH_CHECK(outs.size() == ins.size(), "all_gather_into_tensor_coalesced: ", outs.size(),
                " outputs for ", ins.size(), " inputs");
    std::vector<Body> bodies;
    std::vector<at::Tensor> keep;
    for (size_t i = 0; i < ins.size(); i++) {
      check_tensor(ins[i], "all_gather_into_tensor_coalesced");
      check_tensor(outs[i], "all_gather_into_tensor_coalesced");
      check_same(outs[i], ins[i], "all_gather_into_tensor_coalesced");
      TORCH_CHECK_VALUE(outs[i].numel() == ins[i].numel() * size_,
                        "all_gather_into_tensor_coalesced: output ", i, " has ", outs[i].numel(),
                        " elements; it must have world_size times the input's ", ins[i].numel());
      char *src = ptr(ins[i]), *dst = ptr(outs[i]);
      size_t n = ins[i].nbytes();
      bodies.push_back([=](Comm &c) { return c.all_gather(src, dst, n); });
      keep.push_back(ins[i]);
      keep.push_back(outs[i]);
    }
    return run(c10d::OpType::COALESCED, "all_gather_into_tensor_coalesced", keep, outs,
               sequence(std::move(bodies)));
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs,
                                        std::vector<at::Tensor> &ins,
                                        const c10d::GatherOptions &o) override {
    auto in = single(ins, "gather");
    check_root(o.rootRank, "gather");
    std::vector<at::Tensor> list;
    if (rank_ == o.rootRank) {
      TORCH_CHECK(outs.size() == 1, "gather: the root takes one output list");
      list = outs[0];
      check_list(list, in, "gather");
    } else {
      TORCH_CHECK(outs.empty(), "gather: only the root (rank ", o.rootRank,
                  ") takes an output list");
    }
    return gather_into(list, in, c10d::OpType::GATHER, "gather");
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs,
                                         std::vector<std::vector<at::Tensor>> &ins,
                                         const c10d::ScatterOptions &o) override {
    auto out = single(outs, "scatter");
    check_root(o.rootRank, "scatter");
    int root = static_cast<int>(o.rootRank), me = rank_;
    size_t n = out.nbytes();
    // the root's inputs go out in one broadcast; each rank keeps its block
    auto flat = at::empty({out.numel() * size_}, out.options());
    std::vector<char *> srcs;
    std::vector<at::Tensor> keep{out, flat};
    if (rank_ == root) {
      TORCH_CHECK(ins.size() == 1, "scatter: the root takes one input list");
      check_list(ins[0], out, "scatter");
      for (auto &t : ins[0]) {
        srcs.push_back(ptr(t));
        keep.push_back(t);
      }
    } else {
      TORCH_CHECK(ins.empty(), "scatter: only the root (rank ", root, ") takes an input list");
    }
    char *f = ptr(flat), *dst = ptr(out);
    size_t total = n * static_cast<size_t>(size_);
    return run(c10d::OpType::SCATTER, "scatter", keep, {out}, [=](Comm &c) {
      for (size_t r = 0; r < srcs.size(); r++) std::memcpy(f + r * n, srcs[r], n);
      tnrt_status_t st = c.broadcast(f, total, root);
      if (st == TNRT_OK) std::memcpy(dst, f + static_cast<size_t>(me) * n, n);
      return st;
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                std::vector<std::vector<at::Tensor>> &ins,
                                                const c10d::ReduceScatterOptions &o) override {
    auto out = single(outs, "reduce_scatter");
    TORCH_CHECK(ins.size() == 1, "reduce_scatter takes one input list");
    check_list(ins[0], out, "reduce_scatter");
    auto flat = at::empty({out.numel() * size_}, out.options());
    std::vector<char *> srcs;
    std::vector<at::Tensor> keep{out, flat};
    for (auto &t : ins[0]) {
      at::Tensor s = t;
      if (o.reduceOp == c10d::ReduceOp::PREMUL_SUM) s = premul(t, o.reduceOp, false);
      srcs.push_back(ptr(s));
      keep.push_back(s);
    }
    char *f = ptr(flat), *dst = ptr(out);
    size_t n = out.nbytes();
    int64_t count = out.numel();
    at::ScalarType dt = ccl_dtype(out);
    tnccl_op_t op = to_ccl(o.reduceOp);
    return run(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", keep, {out}, [=](Comm &c) {
      for (size_t r = 0; r < srcs.size(); r++) std::memcpy(f + r * n, srcs[r], n);
      return c.reduce_scatter(f, dst, count, dt, op);
    });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor &out, at::Tensor &in, const c10d::ReduceScatterOptions &o) override {
    std::vector<at::Tensor> outs{out}, ins{in};
    return reduce_scatter_tensors(outs, ins, o, c10d::OpType::_REDUCE_SCATTER_BASE,
                                  "reduce_scatter_tensor");
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
      const c10d::ReduceScatterOptions &o) override {
    return reduce_scatter_tensors(outs, ins, o, c10d::OpType::COALESCED,
                                  "reduce_scatter_tensor_coalesced");
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
                                               std::vector<int64_t> &out_splits,
                                               std::vector<int64_t> &in_splits,
                                               const c10d::AllToAllOptions &) override {
    check_tensor(in, "all_to_all_single");
    check_tensor(out, "all_to_all_single");
    check_same(out, in, "all_to_all_single");
    auto rows = [&](const at::Tensor &t, std::vector<int64_t> &splits, const char *which) {
      int64_t dim0 = t.dim() ? t.size(0) : 1;
      if (splits.empty()) {
        TORCH_CHECK_VALUE(dim0 % size_ == 0, "all_to_all_single: the ", which,
                          "'s first dimension (", dim0, ") must divide by world_size (", size_,
                          ") when no split sizes are given");
        splits.assign(size_, dim0 / size_);
      }
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "all_to_all_single: ", which,
                        " split sizes has ", splits.size(), " entries for world_size ", size_);
      int64_t total = 0;
      for (auto s : splits) {
        TORCH_CHECK_VALUE(s >= 0, "all_to_all_single: negative split size ", s);
        total += s;
      }
      TORCH_CHECK_VALUE(total == dim0, "all_to_all_single: the ", which, " split sizes add up to ",
                        total, " but its first dimension is ", dim0);
      return t.dim() ? t.nbytes() / std::max<int64_t>(dim0, 1) : t.nbytes();
    };
    size_t in_row = rows(in, in_splits, "input"), out_row = rows(out, out_splits, "output");
    auto sizes = std::make_shared<std::vector<size_t>>(4 * size_);
    size_t *so = sizes->data(), *sb = so + size_, *ro = sb + size_, *rb = ro + size_;
    size_t a = 0, b = 0;
    for (int r = 0; r < size_; r++) {
      so[r] = a;
      sb[r] = in_splits[r] * in_row;
      a += sb[r];
      ro[r] = b;
      rb[r] = out_splits[r] * out_row;
      b += rb[r];
    }
    char *src = ptr(in), *dst = ptr(out);
    return run(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {in, out}, {out}, [=](Comm &c) {
      size_t *s = sizes->data();
      return c.all_to_all_v(src, s, s + size_, dst, s + 2 * size_, s + 3 * size_);
    });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs,
                                          std::vector<at::Tensor> &ins,
                                          const c10d::AllToAllOptions &) override {
    TORCH_CHECK_VALUE(
        static_cast<int>(outs.size()) == size_ && static_cast<int>(ins.size()) == size_,
        "all_to_all takes world_size (", size_, ") inputs and outputs, got ", ins.size(), " and ",
        outs.size());
    auto sizes = std::make_shared<std::vector<size_t>>(4 * size_);
    auto ptrs = std::make_shared<std::vector<char *>>();
    std::vector<at::Tensor> keep;
    for (int r = 0; r < size_; r++) {
      check_tensor(ins[r], "all_to_all");
      check_tensor(outs[r], "all_to_all");
      check_same(outs[r], ins[0], "all_to_all");
      check_same(ins[r], ins[0], "all_to_all");
      keep.push_back(ins[r]);
      keep.push_back(outs[r]);
    }
    // packed into one input and one output buffer
    size_t a = 0, b = 0;
    size_t *so = sizes->data(), *sb = so + size_, *ro = sb + size_, *rb = ro + size_;
    for (int r = 0; r < size_; r++) {
      so[r] = a;
      sb[r] = ins[r].nbytes();
      a += sb[r];
      ro[r] = b;
      rb[r] = outs[r].nbytes();
      b += rb[r];
    }
    auto packed_in = at::empty({static_cast<int64_t>(a)}, ins[0].options().dtype(at::kByte));
    auto packed_out = at::empty({static_cast<int64_t>(b)}, ins[0].options().dtype(at::kByte));
    keep.push_back(packed_in);
    keep.push_back(packed_out);
    std::vector<char *> srcs, dsts;
    for (int r = 0; r < size_; r++) {
      srcs.push_back(ptr(ins[r]));
      dsts.push_back(ptr(outs[r]));
    }
    char *pi = ptr(packed_in), *po = ptr(packed_out);
    int n = size_;
    return run(c10d::OpType::ALLTOALL, "all_to_all", keep, outs, [=](Comm &c) {
      size_t *s = sizes->data();
      for (int r = 0; r < n; r++) std::memcpy(pi + s[r], srcs[r], s[n + r]);
      tnrt_status_t st = c.all_to_all_v(pi, s, s + n, po, s + 2 * n, s + 3 * n);
      if (st == TNRT_OK)
        for (int r = 0; r < n; r++) std::memcpy(dsts[r], po + s[2 * n + r], s[3 * n + r]);
      return st;
    });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override {
    auto t = single(ts, "send");
    check_peer(dst, "send");
    return p2p(t, dst, true);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override {
    auto t = single(ts, "recv");
    check_peer(src, "recv");
    return p2p(t, src, false);
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override {
    TORCH_CHECK(false,
                "the neuron backend does not support recv from any source: name the source rank");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &o) override {
    // no tensor: the bound device, else the current one
    return run(c10d::OpType::BARRIER, "barrier", {}, {}, [](Comm &c) { return c.barrier(); });
  }

  void startCoalescing() override {
    TORCH_CHECK(!coalescing_, "startCoalescing called twice without endCoalescing");
    coalescing_ = true;
    batch_ = {};
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    TORCH_CHECK(coalescing_, "endCoalescing without startCoalescing");
    coalescing_ = false;
    Batch b = std::move(batch_);
    batch_ = {};
    if (b.ops.empty()) return completed({});
    auto ops = std::make_shared<std::vector<tnccl_p2p_t>>(std::move(b.ops));
    return run(
        c10d::OpType::COALESCED, "batch_isend_irecv", b.keep, b.recvs,
        [ops](Comm &c) { return c.p2p_batch(ops->data(), static_cast<int>(ops->size())); }, b.done);
  }

 private:
  struct Batch {
    std::vector<tnccl_p2p_t> ops;
    std::vector<at::Tensor> keep, recvs;
    std::shared_ptr<Completion> done;
  };

  void check_tensor(const at::Tensor &t, const char *what) const {
    TORCH_CHECK_VALUE(t.defined(), what, ": undefined tensor");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, what,
                      ": the neuron backend takes dense tensors, got layout ", t.layout());
    TORCH_CHECK_VALUE(t.device().type() == kNeuron || t.device().is_cpu(), what,
                      ": the neuron backend takes neuron or CPU tensors, got a tensor on ",
                      t.device());
    TORCH_CHECK_VALUE(t.is_contiguous(t.suggest_memory_format()), what,
                      ": tensors must be contiguous (call .contiguous() first)");
  }
  void check_same(const at::Tensor &a, const at::Tensor &b, const char *what) const {
    TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), what,
                      ": tensors must have the same dtype, got ", a.scalar_type(), " and ",
                      b.scalar_type());
    TORCH_CHECK_VALUE(a.device() == b.device(), what, ": tensors must be on the same device, got ",
                      a.device(), " and ", b.device());
  }
  at::Tensor single(std::vector<at::Tensor> &ts, const char *what) const {
    TORCH_CHECK_VALUE(ts.size() == 1, what,
                      ": the neuron backend takes one tensor per process, got ", ts.size());
    check_tensor(ts[0], what);
    return ts[0];
  }
  void check_list(const std::vector<at::Tensor> &list, const at::Tensor &like,
                  const char *what) const {
    TORCH_CHECK_VALUE(static_cast<int>(list.size()) == size_, what, ": the tensor list has ",
                      list.size(), " entries; it must have world_size (", size_, ")");
    for (auto &t : list) {
      check_tensor(t, what);
      check_same(t, like, what);
      TORCH_CHECK_VALUE(t.numel() == like.numel(), what, ": every tensor of the list must have ",
                        like.numel(), " elements, got ", t.numel());
    }
  }
  void check_root(int64_t root, const char *what) const {
    TORCH_CHECK_VALUE(root >= 0 && root < size_, what, ": invalid root rank ", root,
                      " for a group of ", size_);
  }
  void check_peer(int peer, const char *what) const {
    TORCH_CHECK_VALUE(peer >= 0 && peer < size_, what, ": invalid peer rank ", peer,
                      " for a group of ", size_);
  }

  static Body sequence(std::vector<Body> bodies) {
    return [bodies = std::move(bodies)](Comm &c) {
      for (auto &b : bodies) {
        tnrt_status_t st = b(c);
        if (st != TNRT_OK) return st;
      }
      return TNRT_OK;
    };
  }

  // all_gather / gather into a list: through one flat buffer.
  Body gather_body(const std::vector<at::Tensor> &list, const at::Tensor &in,
                   std::vector<at::Tensor> &keep) {
    auto flat = at::empty({in.numel() * size_}, in.options());
    keep.push_back(in);
    keep.push_back(flat);
    std::vector<char *> dsts;
    for (auto &t : list) {
      dsts.push_back(ptr(t));
      keep.push_back(t);
    }
    char *src = ptr(in), *f = ptr(flat);
    size_t n = in.nbytes();
    return [=](Comm &c) {
      tnrt_status_t st = c.all_gather(src, f, n);
      if (st == TNRT_OK)
        for (size_t r = 0; r < dsts.size(); r++) std::memcpy(dsts[r], f + r * n, n);
      return st;
    };
  }
  c10::intrusive_ptr<c10d::Work> gather_into(std::vector<at::Tensor> &list, const at::Tensor &in,
                                             c10d::OpType type, const char *name) {
    std::vector<at::Tensor> keep;
    Body b = gather_body(list, in, keep);
    return run(type, name, keep, list, std::move(b));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_list(std::vector<at::Tensor> ts,
                                                const c10d::ReduceOp &rop, c10d::OpType type,
                                                const char *name) {
    std::vector<Body> bodies;
    tnccl_op_t op = to_ccl(rop);
    for (auto &t : ts) {
      at::ScalarType dt = ccl_dtype(t);
      if (rop == c10d::ReduceOp::PREMUL_SUM) premul(t, rop, true);
      char *p = ptr(t);
      int64_t count = t.numel();
      bodies.push_back([=](Comm &c) { return c.all_reduce(p, count, dt, op); });
    }
    return run(type, name, ts, ts, sequence(std::move(bodies)));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensors(std::vector<at::Tensor> &outs,
                                                        std::vector<at::Tensor> &ins,
                                                        const c10d::ReduceScatterOptions &o,
                                                        c10d::OpType type, const char *name) {
    TORCH_CHECK_VALUE(outs.size() == ins.size(), name, ": ", outs.size(), " outputs for ",
                      ins.size(), " inputs");
    std::vector<Body> bodies;
    std::vector<at::Tensor> keep;
    tnccl_op_t op = to_ccl(o.reduceOp);
    for (size_t i = 0; i < ins.size(); i++) {
      check_tensor(ins[i], name);
      check_tensor(outs[i], name);
      check_same(outs[i], ins[i], name);
      TORCH_CHECK_VALUE(ins[i].numel() == outs[i].numel() * size_, name, ": the input has ",
                        ins[i].numel(), " elements; it must have world_size (", size_,
                        ") times the output's ", outs[i].numel());
      at::Tensor in = ins[i];
      if (o.reduceOp == c10d::ReduceOp::PREMUL_SUM) in = premul(in, o.reduceOp, false);
      at::ScalarType dt = ccl_dtype(in);
      char *src = ptr(in), *dst = ptr(outs[i]);
      int64_t count = outs[i].numel();
      bodies.push_back([=](Comm &c) { return c.reduce_scatter(src, dst, count, dt, op); });
      keep.push_back(in);
      keep.push_back(outs[i]);
    }
    return run(type, name, keep, outs, sequence(std::move(bodies)));
  }

  c10::intrusive_ptr<c10d::Work> p2p(const at::Tensor &t, int peer, bool is_send) {
    tnccl_p2p_t op{peer, is_send ? 1 : 0, ptr(t), t.nbytes()};
    if (coalescing_) {
      if (!batch_.done) batch_.done = std::make_shared<Completion>();
      batch_.ops.push_back(op);
      batch_.keep.push_back(t);
      if (!is_send) batch_.recvs.push_back(t);
      // its end event is recorded by endCoalescing
      std::optional<c10::Device> dev;
      if (!t.is_cpu()) dev = t.device();
      return c10::make_intrusive<WorkNeuron>(is_send ? c10d::OpType::SEND : c10d::OpType::RECV,
                                             is_send ? "send" : "recv", batch_.done, dev,
                                             std::vector<at::Tensor>{t}, comm_for(dev)->stream);
    }
    return run(is_send ? c10d::OpType::SEND : c10d::OpType::RECV, is_send ? "send" : "recv", {t},
               is_send ? std::vector<at::Tensor>{} : std::vector<at::Tensor>{t},
               [op](Comm &c) { return c.p2p_batch(&op, 1); });
  }

  c10::intrusive_ptr<c10d::Work> completed(std::vector<at::Tensor> outputs) {
    return c10::make_intrusive<WorkNeuron>(
        c10d::OpType::UNKNOWN, "empty", std::make_shared<Completion>(), std::nullopt,
        std::move(outputs), c10::Stream(c10::Stream::DEFAULT, c10::Device(kNeuron, 0)));
  }

  // The communicator of this group, created on first use on the device of
  // the first neuron tensor (or the current device): one per group, as NCCL
  // binds a group to a device.
  std::shared_ptr<Comm> comm_for(std::optional<c10::Device> device) {
    std::lock_guard<std::mutex> g(mu_);
    // the group's device: the bound one (device_id), else the current device
    // when it first communicates
    c10::DeviceIndex home = comm_                ? comm_->device
                            : getBoundDeviceId() ? getBoundDeviceId()->index()
                                                 : current_device();
    c10::DeviceIndex d = device ? device->index() : home;
    TORCH_CHECK_VALUE(d == home, "this process group runs on neuron:", int(home),
                      "; a tensor on neuron:", int(d),
                      " cannot take part in its collectives (one device per process and group: "
                      "torch.neuron.set_device, or device_id in init_process_group, chooses it)");
    if (comm_) return comm_;
    // (the collectives run as tasks of the device, as its kernels do; a HAL
    // without memory other processes can map fails tnccl_comm_init)
    lazy_init();
    auto comm = std::make_shared<Comm>();
    comm->device = d;
    // the communication streams: the top of the stream range (tnrt.h; the
    // pool hands out the others), one per group, round-robin
    static std::atomic<int> next{0};
    int idx = TNRT_STREAMS_PER_DEVICE - TNRT_COMM_STREAMS + (next++ % TNRT_COMM_STREAMS);
    comm->stream = c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, d), idx);
    comm->rank = rank_;
    comm->size = size_;
    comm->hosts = hosts_;
    // the ccl communicator joins this host's ranks
    int local_rank = rank_, local_size = size_;
    std::string prefix = "tnccl/" + group_id_ + "/";
    if (hosts_ && hosts_->multi()) {
      local_rank = hosts_->local_rank;
      local_size = static_cast<int>(hosts_->local.size());
      prefix += "host" + std::to_string(hosts_->host_of[rank_]) + "/";
    }
    // from now on, device memory the peers on this host can read in place
    // (the direct path of large collectives; ranks started without torchrun
    // have it from here, torchrun's from the start: tnrt.h)
    const char *shared = std::getenv("TORCH_NEURONX_SHARED_DEVICE_MEMORY");
    if (local_size > 1 && !(shared && std::strcmp(shared, "0") == 0)) tnrt_set_shared_segments(1);
    struct Ctx {
      c10d::Store *store;
      std::string prefix;
      int rank, size;
    } ctx{store_.get(), prefix, local_rank, local_size};
    auto exchange = [](void *p, const void *mine, void *all, size_t bytes) -> int {
      auto *x = static_cast<Ctx *>(p);
      try {
        const auto *m = static_cast<const uint8_t *>(mine);
        x->store->set(x->prefix + std::to_string(x->rank), std::vector<uint8_t>(m, m + bytes));
        for (int r = 0; r < x->size; r++) {
          auto v = x->store->get(x->prefix + std::to_string(r));
          if (v.size() != bytes) return -1;
          std::memcpy(static_cast<char *>(all) + r * bytes, v.data(), bytes);
        }
        return 0;
      } catch (const std::exception &) {
        return -1;
      }
    };
    // as a task of the communication stream: the communicator's memory is
    // the device's (the host waits; the exchange runs there too)
    struct Init {
      int device, rank, size;
      int64_t timeout_ms;
      tnccl_allgather_fn exchange;
      void *ctx;
      tnccl_comm_t **out;
      tnrt_status_t status;
      std::string error;
    } init{d, local_rank, local_size, timeout_.count(), exchange, &ctx, &comm->c, TNRT_OK, {}};
    Init *ip = &init;
    tnrt_stream_t *cs = native_stream(comm->stream);
    require_host_code("neuron collectives");
    tnrt_status_t st = tnrt_launch(
        cs,
        [](void *a) {
          Init *i = *static_cast<Init **>(a);
          i->status = tnccl_comm_init(i->device, i->rank, i->size, i->timeout_ms, i->exchange,
                                      i->ctx, i->out);
          if (i->status != TNRT_OK) i->error = tnrt_last_error();
        },
        &ip, sizeof ip, "tnccl_comm_init");
    if (st == TNRT_OK) st = tnrt_stream_synchronize(cs);
    check(st, "creating the neuron communicator");
    if (init.status != TNRT_OK)
      C10_THROW_ERROR(DistBackendError,
                      std::string("creating the neuron communicator failed: ") + init.error);
    comm_ = comm;
    return comm_;
  }

  // Queues body on the group's stream after the current stream's work.
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char *name,
                                     std::vector<at::Tensor> tensors,
                                     std::vector<at::Tensor> outputs, Body body,
                                     std::shared_ptr<Completion> done = nullptr) {
    std::optional<c10::Device> device;
    for (auto &t : tensors) {
      if (t.device().type() == kNeuron) {
        TORCH_CHECK_VALUE(!device || *device == t.device(), name,
                          ": tensors must be on one device, got ", *device, " and ", t.device());
        device = t.device();
      } else {
        TORCH_CHECK_VALUE(!device, name, ": mixed CPU and neuron tensors");
      }
    }
    // the host waits for CPU tensors (they have no stream) and for a barrier
    bool cpu = !device && !tensors.empty();
    bool host_wait = cpu || type == c10d::OpType::BARRIER;
    auto comm = comm_for(device);
    tnrt_stream_t *cs = native_stream(comm->stream);
    if (!done) done = std::make_shared<Completion>();
    done->end = tnrt_event_create(TNRT_EVENT_DEFAULT);
    TORCH_CHECK(done->end, "cannot create a neuron event");
    if (!cpu) {
      // order after the work already queued on the caller's current stream
      tnrt_event_t *start = tnrt_event_create(TNRT_EVENT_DEFAULT);
      TORCH_CHECK(start, "cannot create a neuron event");
      // (at the current stream's last task: no marker task, no wake-up)
      tnrt_status_t st = tnrt_event_record_last(start, current_native_stream(comm->device));
      if (st == TNRT_OK) st = tnrt_stream_wait_event(cs, start);
      tnrt_event_destroy(start);
      check(st, name);
    }
    seq_++;
    auto *job = new Job{comm, done, std::move(body), cs, tnrt_thread_token(), name};
    require_host_code("neuron collectives");
    tnrt_status_t st = tnrt_launch(cs, run_job, &job, sizeof job, name);
    if (st != TNRT_OK) {
      delete job;
      throw_status(st, name);
    }
    check(tnrt_event_record_last(done->end, cs), name);
    if (host_wait) {
      tnrt_event_synchronize(done->end);
      std::string e = done->failure();
      if (!e.empty()) C10_THROW_ERROR(DistBackendError, e);
      if (cpu)
        return c10::make_intrusive<WorkNeuron>(type, name, done, std::nullopt, std::move(outputs),
                                               comm->stream);
    }
    // the memory stays reserved until the communication stream is past
    // the task, whatever the caller does with the tensors
    for (auto &t : tensors) device_allocator()->recordStream(t.storage().data_ptr(), comm->stream);
    return c10::make_intrusive<WorkNeuron>(type, name, done, device, std::move(outputs),
                                           comm->stream);
  }

  uint64_t seq_ = 0, splits_ = 0, monitored_ = 0;
  const c10d::Store *last_split_store_ = nullptr;
  std::vector<int> last_split_ranks_;
  c10::intrusive_ptr<c10d::Backend> last_split_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string group_id_;
  std::shared_ptr<Hosts> hosts_;
  std::mutex mu_;
  std::shared_ptr<Comm> comm_;
  bool coalescing_ = false;
  Batch batch_;
};

}  // namespace torch_neuronx
