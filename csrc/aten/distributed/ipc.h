// Neuron storages shared between processes (torch.multiprocessing).
// Part of distributed.cpp's one translation unit, included there only, in
// order (comm.h, work.h, process_group.h, ipc.h): the c10d and pybind
// headers are compiled once (a torch-header unit costs about a minute on two
// cores), the parts are cut by concern.
#pragma once

namespace torch_neuronx {

// ---------------------------------------------------------------------------
// Neuron storages shared between processes (torch.multiprocessing), as CUDA
// IPC shares CUDA storages: the sender moves the storage's bytes into device
// memory other processes can map (once; the storage keeps it) and sends its
// handle; the receiver maps it, no copy. torch_neuronx/_ipc.py holds the
// pickling side.

namespace {

struct SharedRegion {
  c10::DeviceIndex device;
  size_t bytes;
  tnrt_mem_handle_t handle;
};
std::mutex g_shared_mu;
std::unordered_map<const void *, SharedRegion> g_shared;  // exported, by address

void free_exported(void *p) {
  SharedRegion r;
  {
    std::lock_guard<std::mutex> g(g_shared_mu);
    auto it = g_shared.find(p);
    if (it == g_shared.end()) return;
    r = it->second;
    g_shared.erase(it);
  }
  // work queued on the storage may still run: the memory outlives it (the
  // device's streams pass first; a fault stays for the user's next sync)
  tnrt_device_wait(r.device);
  tnrt_mem_free_shared(r.device, p, r.bytes);
}

struct Imported {
  c10::DeviceIndex device;
  size_t bytes;
};

}  // namespace

// (handle bytes, nbytes) of a neuron storage, moved into shared device memory
// first if it is not there yet. The storage's pending writes finish first.
static py::tuple share_storage(py::object obj) {
  const c10::Storage &storage = THPStorage_Unpack(obj.ptr());
  TORCH_CHECK(storage.device_type() == kNeuron, "_share_neuron_: a neuron storage is required");
  c10::DeviceIndex d = storage.device().index();
  size_t n = storage.nbytes();
  void *p = storage.mutable_data();
  {
    std::lock_guard<std::mutex> g(g_shared_mu);
    auto it = g_shared.find(p);
    if (p && it != g_shared.end())
      return py::make_tuple(
          py::bytes(reinterpret_cast<const char *>(&it->second.handle), sizeof(tnrt_mem_handle_t)),
          n);
  }
  SharedRegion r{d, n ? n : 1, {}};
  void *q = nullptr;
  {
    py::gil_scoped_release nogil;
    check(tnrt_device_synchronize(d), "sharing a neuron tensor");
    check(tnrt_mem_alloc_shared(d, r.bytes, &q, &r.handle),
          "allocating device memory other processes can map");
    // the copy is a device task (device memory is the device's to touch)
    struct Copy {
      void *dst;
      const void *src;
      size_t n;
    } args{q, p, n};
    tnrt_stream_t *s = tnrt_stream_get(d, 0);
    require_host_code("neuron collectives");
    tnrt_status_t st = tnrt_launch(
        s,
        [](void *a) {
          auto *c = static_cast<Copy *>(a);
          if (c->n) std::memcpy(c->dst, c->src, c->n);
        },
        &args, sizeof args, "share_storage");
    if (st == TNRT_OK) st = tnrt_stream_synchronize(s);
    if (st != TNRT_OK) tnrt_mem_free_shared(d, q, r.bytes);
    check(st, "sharing a neuron tensor");
  }
  {
    std::lock_guard<std::mutex> g(g_shared_mu);
    g_shared[q] = r;
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(
      c10::DataPtr(q, q, &free_exported, c10::Device(kNeuron, d)));
  return py::make_tuple(
      py::bytes(reinterpret_cast<const char *>(&r.handle), sizeof(tnrt_mem_handle_t)), n);
}

namespace {
void free_imported(void *ctx) {
  auto *im = static_cast<std::pair<void *, Imported> *>(ctx);
  tnrt_device_wait(im->second.device);  // as free_exported
  tnrt_mem_unimport(im->second.device, im->first, im->second.bytes);
  delete im;
}
}  // namespace

// A storage over device memory another process shared (share_storage).
static py::object open_shared_storage(int device, py::bytes handle, size_t nbytes) {
  check_device_index(static_cast<c10::DeviceIndex>(device));
  std::string h = handle;
  TORCH_CHECK(h.size() == sizeof(tnrt_mem_handle_t), "not a neuron shared-memory handle");
  tnrt_mem_handle_t mh;
  std::memcpy(&mh, h.data(), sizeof mh);
  void *p = nullptr;
  size_t bytes = 0;
  check(tnrt_mem_import(device, &mh, &p, &bytes),
        "mapping a neuron tensor another process shared (the sender must keep it alive until it "
        "is received)");
  TORCH_CHECK(bytes >= nbytes, "a shared neuron storage of ", bytes, " bytes cannot hold ", nbytes);
  auto *ctx =
      new std::pair<void *, Imported>(p, Imported{static_cast<c10::DeviceIndex>(device), bytes});
  c10::DataPtr dp(p, ctx, &free_imported,
                  c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device)));
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
                                                             nbytes, std::move(dp), nullptr,
                                                             /*resizable=*/false));
  return py::reinterpret_steal<py::object>(THPStorage_Wrap(std::move(storage)));
}

}  // namespace torch_neuronx
