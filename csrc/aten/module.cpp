// The Python extension torch_neuronx._C: registration at import and the
// functions torch_neuronx/ builds torch.neuron from.
#include "neuron.h"

#include <ATen/core/CachingHostAllocator.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>
#include <torch/version.h>

#include <cctype>

namespace py = pybind11;
using namespace torch_neuronx;

static py::dict device_properties(int index) {
  check_device_index(static_cast<c10::DeviceIndex>(index));
  tnrt_device_props_t p;
  check(tnrt_device_properties(index, &p), "get_device_properties");
  py::dict d;
  d["name"] = std::string(p.name);
  d["instance_model"] = std::string(p.instance_model);
  d["total_memory"] = p.total_memory;
  d["modelled_memory"] = p.modelled_memory;
  d["generation"] = p.generation;
  d["physical_cores"] = p.physical_cores;
  d["logical_cores_per_chip"] = p.logical_cores_per_chip;
  d["chip"] = p.chip;
  d["global_core_id"] = p.global_core_id;
  d["hbm_bandwidth_gbs"] = p.hbm_bandwidth_gbs;
  d["bf16_tflops"] = p.bf16_tflops;
  return d;
}

namespace torch_neuronx {
void bind_memory_history(py::module &m);  // memory_history.cpp
void bind_distributed(py::module &m);     // distributed.cpp
void bind_compiled(py::module &m);        // compiled.cpp
}  // namespace torch_neuronx

PYBIND11_MODULE(_C, m) {
  m.doc() = "TorchNeuron native extension";
  register_runtime();
  torch_neuronx::bind_memory_history(m);
  torch_neuronx::bind_distributed(m);
  torch_neuronx::bind_compiled(m);

  m.def("_device_count", [] { return tnrt_device_count(); });
  m.def("_is_initialized", [] { return bool(tnrt_is_initialized()); });
  m.def("_in_bad_fork", [] { return bool(tnrt_in_bad_fork()); });
  m.def("_lazy_init", [] { lazy_init(); });
  m.def("_init_error", [] {
    tnrt_status_t st = tnrt_init();
    return st == TNRT_OK ? std::string() : std::string(tnrt_last_error());
  });
  m.def("_current_device", [] { return current_device(); });
  m.def("_set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_get_device_properties", &device_properties);
  m.def("_set_memory_fraction", [](double f, int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    check(tnrt_set_memory_fraction(d, f), "set_per_process_memory_fraction");
  });
  m.def("_get_memory_fraction", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    double f = 1.0;
    check(tnrt_get_memory_fraction(d, &f), "get_per_process_memory_fraction");
    return f;
  });
  m.def("_mempool_use", [](int d, uint64_t id) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    check(id ? tnrt_mempool_begin(d, id) : tnrt_mempool_end(d), "use_mem_pool");
  });
  m.def("_mempool_release", [](int d, uint64_t id) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    check(tnrt_mempool_release(d, id), "MemPool release");
  });
  m.def("_device_busy_ns", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    uint64_t ns = 0;
    check(tnrt_device_busy_ns(d, &ns), "utilization");
    return ns;
  });
  m.def("_host_memory_stats", []() {
    at::HostStats s = at::getHostAllocator(c10::DeviceType::PrivateUse1)->get_stats();
    py::dict d;
    auto put = [&](const char *name, const c10::CachingAllocator::Stat &st) {
      std::string n(name);
      d[py::str(n + ".current")] = st.current;
      d[py::str(n + ".peak")] = st.peak;
      d[py::str(n + ".allocated")] = st.allocated;
      d[py::str(n + ".freed")] = st.freed;
    };
    put("allocations", s.allocations);
    put("allocated_bytes", s.allocated_bytes);
    put("active_requests", s.active_requests);
    put("active_bytes", s.active_bytes);
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    return d;
  });
  m.def("_reset_host_memory_stats", [](bool peak) {
    auto *h = at::getHostAllocator(c10::DeviceType::PrivateUse1);
    if (peak)
      h->reset_peak_stats();
    else
      h->reset_accumulated_stats();
  });
  m.def("_synchronize", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    py::gil_scoped_release nogil;
    check(tnrt_device_synchronize(d), "synchronize");
  });
  // torch.cuda._sleep's analogue: a task on the current stream that spins
  // for `cycles` nanoseconds (a nominal 1 GHz), for tests of stream order.
  m.def("_sleep", [](int64_t cycles) {
    auto task = [](void *a) {
      int64_t until = tnrt_now_ns() + *static_cast<int64_t *>(a);
      while (tnrt_now_ns() < until) {
      }
    };
    launch_host_code(current_device(), task, &cycles, sizeof cycles, "_sleep");
  });
  m.def("_current_stream", [](int d) {
    c10::Stream s = current_stream(static_cast<c10::DeviceIndex>(d));
    return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
  });
  m.def("_set_stream", [](int64_t id, int d) {
    set_current_stream(c10::Stream(c10::Stream::UNSAFE,
                                   c10::Device(kNeuron, static_cast<c10::DeviceIndex>(d)), id));
  });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  m.def("_fallback_ops", [] { return fallback_ops(); });
  m.def("_clear_op_tracking", [] { clear_op_tracking(); });
  m.def("_executed_ops", [] { return executed_ops(); });
  m.def("_set_op_tracking", [](bool on) { set_op_tracking(on); });
  m.def("_op_tracking", [] { return op_tracking(); });
  m.def("_set_fallback_mode", [](const std::string &s) { set_fallback_mode(s); });
  m.def("_fallback_mode", [] { return fallback_mode(); });
  m.def("_trace_start", [] { trace_start(); });
  m.def("_trace_stop", [] {
    py::list out;
    for (const tnrt_trace_record_t &r : trace_stop())
      out.append(
          py::make_tuple(std::string(r.name), r.device, r.stream, r.seq, r.start_ns, r.end_ns));
    return out;
  });
  m.def("_now_ns", [] { return tnrt_now_ns(); });
  m.def("_num_threads", [] { return tnrt_num_threads(); });
  m.def("_launch_blocking", [] {
    lazy_init();
    return bool(tnrt_launch_blocking());
  });
  m.def("_build_info", [] {
    py::dict d;
    d["compiler"] = std::string(__VERSION__);
    d["cplusplus"] = static_cast<long>(__cplusplus);
    d["torch"] = std::string(TORCH_VERSION);
    d["hal"] = std::string(tnrt_hal_name());  // initialises the runtime
    d["host_addressable"] = bool(tnrt_host_addressable());
    d["task_slot_bytes"] = TNRT_TASK_ARGS_MAX;
    d["streams_per_device"] = TNRT_STREAMS_PER_DEVICE;
    d["comm_streams"] = TNRT_COMM_STREAMS;
    return d;
  });
  // Largest element-wise kernel run in place on an idle stream (0: none);
  // returns the old value. For measuring the in-place path against queueing.
  m.def("_set_small_kernel_elems", [](int64_t n) { return set_small_kernel_elems(n); });
  m.def("_isa", [] { return std::string(tnk_isa_name(tnk_isa())); });
  // The benchmarks' compute anchor: peak flops/s of one instruction kind
  // (tnk.h), measured on the current stream's threads; 0 without it.
  m.def("_measure_peak", [](const std::string &kind) {
    static const std::pair<const char *, int> kinds[] = {
        {"fp32-fma256", TNK_PEAK_F32_FMA256},   {"fp32-fma512", TNK_PEAK_F32_FMA512},
        {"bf16-dot512", TNK_PEAK_BF16_DOT512},  {"bf16-amx", TNK_PEAK_BF16_AMX},
        {"int8-vnni512", TNK_PEAK_I8_VNNI512},  {"int16-madd512", TNK_PEAK_I16_MADD512},
        {"int16-madd256", TNK_PEAK_I16_MADD256}};
    int k = -1;
    for (const auto &e : kinds)
      if (kind == e.first) k = e.second;
    TORCH_CHECK_VALUE(k >= 0, "_measure_peak: kind must be fp32-fma256, fp32-fma512, ",
                      "bf16-dot512, bf16-amx, int8-vnni512, int16-madd512 or int16-madd256, got '",
                      kind, "'");
    struct PeakArgs {
      int kind;
      double *out;
    };
    double result = 0;
    PeakArgs a{k, &result};
    c10::DeviceIndex device = current_device();
    launch_host_code(
        device,
        [](void *p) {
          auto *m = static_cast<PeakArgs *>(p);
          *m->out = tnk_measure_peak(m->kind);
        },
        &a, sizeof a, "measure_peak");
    check(tnrt_stream_synchronize(current_native_stream(device)), "measure_peak");
    return result;
  });
  // The benchmarks' bandwidth anchor: a plain libc memcpy split over the
  // pool, launched on the current stream so that it runs on the same
  // threads (and CPUs) as the kernels it is compared with.
  m.def("_memcpy_on_stream", [](uintptr_t dst, uintptr_t src, int64_t bytes) {
    TORCH_CHECK(bytes >= 0, "_memcpy_on_stream: bytes must be >= 0");
    struct MemcpyArgs {
      void *dst;
      const void *src;
      int64_t bytes;
    } a{reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), bytes};
    launch_host_code(
        current_device(),
        [](void *p) {
          auto *m = static_cast<MemcpyArgs *>(p);
          tnk_time_memcpy(m->dst, m->src, m->bytes);
        },
        &a, sizeof a, "memcpy");
  });
  m.def("_cpu_features", [] {
    int f = tnk_cpu_features();
    py::list out;
    if (f & TNK_ISA_AVX2) out.append("avx2+fma");
    if (f & TNK_ISA_AVX512) out.append("avx512");
    if (f & TNK_FEAT_AVX512BF16) out.append("avx512-bf16");
    if (f & TNK_FEAT_AMX_BF16) out.append("amx-bf16");
    if (f & TNK_FEAT_AVX512VNNI) out.append("avx512-vnni");
    return out;
  });
  // What bf16 GEMMs run on in this process: "amx" (tiles), "avx512-bf16"
  // (dot products) or "fp32" (converted while packing).
  m.def("_bf16_gemm_kernel", [] { return std::string(tnk_bf16_gemm_kernel()); });
  // Whether bf16 GEMMs may use AMX tiles, and why not (tnk.h: the CPU,
  // TORCH_NEURONX_AMX, the OS grant, the tile self-test).
  m.def("_amx_status", [] { return std::string(tnk_amx_status()); });
  // The kernel provider in use (runtime/provider.h) and, under the counting
  // provider, the launches of each kernel so far (names as in
  // kernels/kernel_list.h, lower case), optionally reset.
  m.def("_kernel_provider", [] { return std::string(kernel_provider()->name); });
  m.def(
      "_kernel_launch_counts",
      [](bool reset) {
        TORCH_CHECK(std::string(kernel_provider()->name) == "counting",
                    "_kernel_launch_counts: launches are counted only under "
                    "TORCH_NEURONX_KERNEL_PROVIDER=counting (the provider in use is '",
                    kernel_provider()->name, "')");
        uint64_t counts[TNK_KERNEL_COUNT];
        tnk_kernel_launch_counts(counts, reset ? 1 : 0);
        py::dict out;
        for (int k = 0; k < TNK_KERNEL_COUNT; k++) {
          std::string name(tnk_kernel_names[k]);
          for (char &c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          out[py::str(name)] = counts[k];
        }
        return out;
      },
      py::arg("reset") = false);
}
