// Kernels that torch.compile generates for the neuron device (Inductor's C++
// code generation, torch_neuronx/_inductor.py) run as tasks on the current
// stream of their tensors' device, in order with eager work, as a CUDA
// graph's kernels run on the current CUDA stream: the host never waits for
// the device to call one.
//
// Each generated module exports, beside Inductor's `kernel(...)`, an entry
// `neuron_packed_kernel(const uint64_t *args, char *msg, size_t msg_size)`
// that unpacks one 64-bit slot per argument, calls the kernel, and turns a C++
// exception into a return code (1: integer division by zero, 2: another
// exception, its what() in msg). The launch below packs the Python arguments
// (tensors become their data pointers) into a task that carries them inline.
#include "runtime.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace py = pybind11;

namespace torch_neuronx {

// A fault's message outlives the task that reports it (the fault keeps the
// pointer): interned for the process's lifetime. Also used by
// distributed.cpp and random_ops.cpp.
const char *intern_message(const std::string &msg) {
  static std::mutex mu;
  static auto *strings = new std::set<std::string>();
  std::lock_guard<std::mutex> g(mu);
  return strings->insert(msg).first->c_str();
}

namespace {

using packed_fn = int (*)(const uint64_t *args, char *msg, size_t msg_size);

// Header, then one slot per argument. An argument whose bit is set in
// by_value is a one-element CPU tensor (Inductor passes CPU scalars, such as
// an optimizer's step count, to device kernels): its slot holds the value,
// copied at launch, because the host may change the tensor before the task
// runs; the task passes the kernel a pointer to that copy.
struct CompiledTask {
  packed_fn fn;
  tnrt_stream_t *stream;
  uint32_t origin;
  uint32_t nargs;
  uint64_t by_value[2];
  uint64_t args[(TNRT_TASK_ARGS_MAX - 40) / sizeof(uint64_t)];
};
static_assert(offsetof(CompiledTask, args) == 40, "task header layout");
static_assert(sizeof(CompiledTask) <= TNRT_TASK_ARGS_MAX, "task fits inline");
constexpr size_t kMaxArgs = sizeof(CompiledTask::args) / sizeof(uint64_t);
static_assert(kMaxArgs <= 128, "by_value has a bit per argument");

void report(int rc, const char *msg, tnrt_stream_t *stream, uint32_t origin) {
  if (rc == 1)
    tnrt_stream_fault(stream, TNRT_FAULT_ZERO_DIVISION, "compiled kernel", 0, 0, origin);
  else if (rc != 0)
    tnrt_stream_fault(stream, TNRT_FAULT_MESSAGE,
                      intern_message(std::string("compiled kernel: ") + msg), 0, 0, origin);
}

void run_compiled(void *p) {
  auto *t = static_cast<CompiledTask *>(p);
  uint64_t values[kMaxArgs];
  for (uint32_t i = 0; i < t->nargs; i++)
    if (t->by_value[i / 64] >> (i % 64) & 1) {
      values[i] = t->args[i];
      t->args[i] = reinterpret_cast<uintptr_t>(&values[i]);
    }
  char msg[256] = {0};
  int rc = t->fn(t->args, msg, sizeof msg - 1);
  report(rc, msg, t->stream, t->origin);
}

// Packs args by fmt: 'p' a tensor (its data pointer; a one-element CPU
// tensor by value, or by address when by_value is null and the caller runs
// the kernel at once; any other tensor must be on the device),
// 'i' an int, 'f' a float (its float32 bits), 'u' an address given as an
// int. Returns the device of the neuron tensor arguments (-1: none).
c10::DeviceIndex pack(const std::string &fmt, const py::args &args, uint64_t *slots,
                      uint64_t *by_value) {
  c10::DeviceIndex device = -1;
  for (size_t i = 0; i < fmt.size(); i++) {
    PyObject *o = args[i].ptr();
    switch (fmt[i]) {
      case 'p': {
        TORCH_CHECK_TYPE(THPVariable_Check(o), "compiled neuron kernel: argument ", i,
                         " must be a tensor, got ", Py_TYPE(o)->tp_name);
        const at::Tensor &t = THPVariable_Unpack(o);
        if (t.device().is_cpu() && t.numel() == 1 && t.element_size() <= 8) {
          if (!by_value) {  // the caller runs the kernel now
            slots[i] = reinterpret_cast<uintptr_t>(t.data_ptr());
            break;
          }
          slots[i] = 0;
          std::memcpy(&slots[i], t.data_ptr(), t.element_size());
          by_value[i / 64] |= uint64_t{1} << (i % 64);
          break;
        }
        TORCH_CHECK(t.device().type() == kNeuron, "compiled neuron kernel: argument ", i, " is on ",
                    t.device(), "; every tensor of a neuron kernel must be on a neuron device");
        if (device < 0)
          device = t.device().index();
        else
          TORCH_CHECK(t.device().index() == device, "compiled neuron kernel: argument ", i,
                      " is on ", t.device(), ", another is on neuron:", int(device));
        slots[i] = reinterpret_cast<uintptr_t>(t.data_ptr());
        break;
      }
      case 'i': slots[i] = static_cast<uint64_t>(py::cast<int64_t>(args[i])); break;
      case 'u': slots[i] = static_cast<uint64_t>(py::cast<uint64_t>(args[i])); break;
      case 'f': {
        float f = py::cast<float>(args[i]);
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        slots[i] = bits;
        break;
      }
      default: TORCH_CHECK(false, "compiled neuron kernel: unknown argument kind '", fmt[i], "'");
    }
  }
  return device;
}

// fn: the address of a module's neuron_packed_kernel; name: an interned
// label (from _compiled_kernel_name) for traces.
void launch_compiled(uintptr_t fn, const std::string &fmt, uintptr_t name, const py::args &args) {
  TORCH_CHECK(args.size() == fmt.size(), "compiled neuron kernel takes ", fmt.size(),
              " arguments, got ", args.size());
  CompiledTask task;
  task.fn = reinterpret_cast<packed_fn>(fn);
  task.nargs = static_cast<uint32_t>(fmt.size());
  task.origin = tnrt_thread_token();
  if (fmt.size() > kMaxArgs) {
    // More arguments than a task carries inline: run it here, after the
    // stream's earlier work (correct, and rare: a fused kernel of over 127 arguments).
    std::vector<uint64_t> slots(fmt.size());
    c10::DeviceIndex device = pack(fmt, args, slots.data(), nullptr);
    if (device < 0) device = current_device();
    check(tnrt_stream_synchronize(current_native_stream(device)), "compiled neuron kernel");
    char msg[256] = {0};
    int rc = task.fn(slots.data(), msg, sizeof msg - 1);
    TORCH_CHECK(rc != 1, "ZeroDivisionError");
    TORCH_CHECK(rc == 0, "compiled neuron kernel: ", msg);
    return;
  }
  task.by_value[0] = task.by_value[1] = 0;
  c10::DeviceIndex device = pack(fmt, args, task.args, task.by_value);
  if (device < 0) device = current_device();
  task.stream = current_native_stream(device);
  launch_host_code(device, run_compiled, &task,
                   offsetof(CompiledTask, args) + fmt.size() * sizeof(uint64_t),
                   reinterpret_cast<const char *>(name));
}

tnrt_stream_t *stream_of(int device, int64_t id) {
  check_device_index(static_cast<c10::DeviceIndex>(device));
  return native_stream(c10::Stream(c10::Stream::UNSAFE,
                                   c10::Device(kNeuron, static_cast<c10::DeviceIndex>(device)),
                                   static_cast<c10::StreamId>(id)));
}

}  // namespace

void bind_compiled(py::module &m) {
  // Graph capture (torch.neuron.NeuronGraph): a graph is an opaque address.
  m.def("_graph_capture_begin", [](int device, int64_t stream) {
    check(tnrt_stream_begin_capture(stream_of(device, stream)), "NeuronGraph capture_begin");
  });
  m.def("_graph_capture_end", [](int device, int64_t stream) {
    tnrt_graph_t *g = nullptr;
    check(tnrt_stream_end_capture(stream_of(device, stream), &g), "NeuronGraph capture_end");
    return reinterpret_cast<uintptr_t>(g);
  });
  m.def("_graph_launch", [](uintptr_t g, int device, int64_t stream) {
    check(tnrt_graph_launch(reinterpret_cast<tnrt_graph_t *>(g), stream_of(device, stream)),
          "NeuronGraph replay");
  });
  m.def("_graph_task_count",
        [](uintptr_t g) { return tnrt_graph_task_count(reinterpret_cast<tnrt_graph_t *>(g)); });
  m.def("_graph_destroy", [](uintptr_t g) {
    py::gil_scoped_release nogil;  // waits for a replay still queued
    tnrt_graph_destroy(reinterpret_cast<tnrt_graph_t *>(g));
  });
  m.def("_stream_is_capturing", [](int device, int64_t stream) {
    return bool(tnrt_stream_is_capturing(stream_of(device, stream)));
  });
  m.def("_launch_compiled", &launch_compiled);
  m.def("_compiled_kernel_name",
        [](const std::string &name) { return reinterpret_cast<uintptr_t>(intern_message(name)); });
}

}  // namespace torch_neuronx
