// The c10d backend "neuron" (torch.distributed): ProcessGroupNeuron, a
// c10d::Backend over the shared-memory collectives of csrc/ccl, and its
// Work. docs/design/distributed-c10d.md has the integration points. One
// translation unit cut by concern into the headers of distributed/ (comm.h:
// the communicator, work.h: a collective's Work, process_group.h: the
// backend, ipc.h: storages shared between processes), included below.
//
// Streams, as NCCL: each process group owns one communication stream per
// device. A collective records an event on the caller's current stream, the
// communication stream waits on it (so the collective reads what earlier
// work wrote), runs the collective as one task, and records an end event.
// A synchronous call (async_op=False) makes the current stream wait on that
// end event at once; an asynchronous one leaves it to work.wait(). The host
// never blocks, so compute queued after the call overlaps the
// communication. All collectives of a group run on its stream, in the order
// the host issued them, which is the order every rank agrees on.
//
// CPU tensors (the backend is registered for "cpu" too, so CPU collectives
// of a "neuron" group work) run the same task and the host waits for it.
//
// A failed collective (a peer that exited or timed out, arguments that
// differ across ranks) is a fault of the communication stream: every
// stream that waits on the collective inherits it and the next
// synchronisation raises it, as a CUDA error would surface; work.wait()
// raises it at once where the host waits (TORCH_NEURONX_BLOCKING_WAIT=1 or
// a CPU collective). The group is unusable afterwards, as NCCL's.
#include "neuron.h"

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/exception.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

extern "C" {
#include "../ccl/ccl.h"
}

namespace py = pybind11;

// The parts, in this order (each a header of this one unit: see comm.h):
// the communicator,
#include "distributed/comm.h"
// a collective's Work,
#include "distributed/work.h"
// the c10d backend,
#include "distributed/process_group.h"
// storages shared between processes.
#include "distributed/ipc.h"

namespace torch_neuronx {

void bind_distributed(py::module &m) {
  m.def("_share_neuron_storage", &share_storage);
  m.def("_open_shared_neuron_storage", &open_shared_storage);
  py::module::import("torch.distributed");
  py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
      m, "ProcessGroupNeuron")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string group_id,
                       std::vector<int> host_of,
                       std::optional<c10::intrusive_ptr<c10d::Backend>> leaders,
                       std::optional<c10::intrusive_ptr<c10d::Backend>> world) {
             std::shared_ptr<Hosts> hosts;
             if (!host_of.empty()) {
               TORCH_CHECK_VALUE(static_cast<int>(host_of.size()) == size,
                                 "host_of needs one entry per rank");
               hosts = std::make_shared<Hosts>();
               hosts->host_of = std::move(host_of);
               hosts->nhosts = *std::max_element(hosts->host_of.begin(), hosts->host_of.end()) + 1;
               for (int r = 0; r < size; r++)
                 if (hosts->host_of[r] == hosts->host_of[rank]) {
                   if (r == rank) hosts->local_rank = static_cast<int>(hosts->local.size());
                   hosts->local.push_back(r);
                 }
               if (leaders) hosts->leaders = *leaders;
               if (world) hosts->world = *world;
               TORCH_CHECK_VALUE(
                   !hosts->multi() || (hosts->world && (hosts->local_rank != 0 || hosts->leaders)),
                   "a group across hosts needs its Gloo groups");
             }
             return c10::make_intrusive<ProcessGroupNeuron>(store, rank, size, timeout,
                                                            std::move(group_id), std::move(hosts));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_id"), py::arg("host_of") = std::vector<int>{},
           py::arg("leaders") = py::none(), py::arg("world") = py::none(),
           py::call_guard<py::gil_scoped_release>())
      // what split_group deep-copies as the parent's options: None makes the
      // split take getBackendOptions() in C++
      .def_property_readonly("options", [](ProcessGroupNeuron &) { return py::none(); })
      // new_group on a rank outside the group: nothing to do (see split)
      .def("perform_nocolor_split", [](ProcessGroupNeuron &, const at::Device &) {})
      .def("_direct_calls", &ProcessGroupNeuron::direct_calls);
}

}  // namespace torch_neuronx
