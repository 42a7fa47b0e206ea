// Memory history and snapshots (torch.neuron.memory._record_memory_history,
// _snapshot): what torch.cuda records, in the format PyTorch's memory
// visualiser (torch.cuda._memory_viz, pytorch.org/memory_viz) reads: a trace
// of allocation events per device with the Python stack of each, and the
// allocator's segments and blocks (from the runtime's allocator walk) with
// the stack that allocated each live block.
#include "neuron.h"

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/extension.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

// From libtorch_python (torch/csrc/profiler/python/combined_traceback.h,
// whose header needs nlohmann/json, which the wheel does not ship).
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback *> &to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace torch_neuronx {
namespace {

struct TraceEntry {
  const char *action;  // "alloc", "free_requested", "free_completed"
  uint64_t addr, size;
  int device, stream;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> frames;
};

struct History {
  std::mutex mu;
  bool trace = false;        // record the event trace ("all")
  bool state = false;        // remember the stack of each live block ("state", "all")
  bool cpp_frames = false;   // stacks="all": C++ frames too
  bool free_frames = false;  // context="all": the stack of each free too
  size_t max_entries = SIZE_MAX;
  std::unordered_map<int, std::deque<TraceEntry>> traces;  // per device
  std::unordered_map<uint64_t, std::shared_ptr<torch::CapturedTraceback>> live;
};

History &history() {
  static History *h = new History();  // lives to the end of the process
  return *h;
}

std::atomic<bool> g_enabled{false};

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void record(const char *action, void *ptr, size_t size, int device, int stream, bool alloc) {
  History &h = history();
  std::shared_ptr<torch::CapturedTraceback> tb;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    if (!h.trace && !h.state) return;
  }
  if (alloc || (h.trace && h.free_frames))
    tb = torch::CapturedTraceback::gather(true, false, h.cpp_frames);
  std::lock_guard<std::mutex> lock(h.mu);
  uint64_t addr = reinterpret_cast<uintptr_t>(ptr);
  if (h.state) {
    if (alloc)
      h.live[addr] = tb;
    else
      h.live.erase(addr);
  }
  if (!h.trace) return;
  auto &q = h.traces[device];
  q.push_back({action, addr, size, device, stream, now_us(), tb});
  while (q.size() > h.max_entries) q.pop_front();
}

py::list frames_of(const std::shared_ptr<torch::CapturedTraceback> &tb,
                   std::unordered_map<torch::CapturedTraceback *, py::object> &symbols) {
  if (!tb) return py::list();
  auto it = symbols.find(tb.get());
  return it == symbols.end() ? py::list() : py::list(it->second);
}

// Builds torch.cuda.memory._snapshot()'s dictionary for the neuron devices.
py::dict snapshot() {
  History &h = history();
  std::vector<std::pair<int, std::deque<TraceEntry>>> traces;
  std::unordered_map<uint64_t, std::shared_ptr<torch::CapturedTraceback>> live;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    for (auto &kv : h.traces) traces.emplace_back(kv.first, kv.second);
    live = h.live;
  }
  // Symbolise every stack once.
  std::vector<torch::CapturedTraceback *> to_symbolize;
  for (auto &kv : traces)
    for (auto &e : kv.second)
      if (e.frames) to_symbolize.push_back(e.frames.get());
  for (auto &kv : live)
    if (kv.second) to_symbolize.push_back(kv.second.get());
  std::vector<py::object> symbolized = torch::py_symbolize(to_symbolize);
  std::unordered_map<torch::CapturedTraceback *, py::object> symbols;
  for (size_t i = 0; i < to_symbolize.size(); i++) symbols[to_symbolize[i]] = symbolized[i];

  py::list segments;
  int n = tnrt_device_count();
  for (int d = 0; d < n; d++) {
    // the walk's callbacks run under the allocator lock: collect plain data
    struct Seg {
      tnrt_segment_info_t info;
      std::vector<tnrt_block_info_t> blocks;
    };
    std::vector<Seg> segs;
    check(tnrt_memory_walk(
              d,
              [](void *ctx, const tnrt_segment_info_t *s) {
                static_cast<std::vector<Seg> *>(ctx)->push_back({*s, {}});
              },
              [](void *ctx, const tnrt_block_info_t *b) {
                static_cast<std::vector<Seg> *>(ctx)->back().blocks.push_back(*b);
              },
              &segs),
          "memory snapshot");
    for (const Seg &s : segs) {
      py::dict seg;
      py::list blocks;
      int64_t allocated = 0, requested = 0;
      for (const tnrt_block_info_t &b : s.blocks) {
        py::dict blk;
        blk["address"] = b.address;
        blk["size"] = b.size;
        blk["requested_size"] = b.allocated ? b.requested : b.size;
        blk["state"] = b.allocated ? "active_allocated" : "inactive";
        auto it = live.find(b.address);
        blk["frames"] =
            b.allocated && it != live.end() ? frames_of(it->second, symbols) : py::list();
        if (b.allocated) {
          allocated += static_cast<int64_t>(b.size);
          requested += static_cast<int64_t>(b.requested);
        }
        blocks.append(blk);
      }
      seg["device"] = d;
      seg["address"] = s.info.address;
      seg["total_size"] = s.info.size;
      seg["allocated_size"] = allocated;
      seg["active_size"] = allocated;
      seg["requested_size"] = requested;
      seg["stream"] = s.info.stream;
      seg["segment_type"] = s.info.pool == TNRT_POOL_SMALL ? "small" : "large";
      seg["segment_pool_id"] = py::make_tuple(0, s.info.mempool);
      seg["is_expandable"] = false;
      seg["frames"] = py::list();
      seg["blocks"] = blocks;
      segments.append(seg);
    }
  }
  py::list device_traces;
  for (int d = 0; d < n; d++) {
    py::list events;
    for (auto &kv : traces) {
      if (kv.first != d) continue;
      for (const TraceEntry &e : kv.second) {
        py::dict ev;
        ev["action"] = e.action;
        ev["addr"] = e.addr;
        ev["size"] = e.size;
        ev["stream"] = e.stream;
        ev["time_us"] = e.time_us;
        ev["frames"] = frames_of(e.frames, symbols);
        events.append(ev);
      }
    }
    device_traces.append(events);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  out["allocator_settings"] = py::dict();
  out["external_annotations"] = py::list();
  return out;
}

}  // namespace

bool memory_history_enabled() { return g_enabled.load(std::memory_order_relaxed); }

void memory_history_alloc(void *ptr, size_t size, int device, int stream) {
  record("alloc", ptr, size, device, stream, true);
}

void memory_history_free(void *ptr, size_t size, int device, int stream) {
  record("free_requested", ptr, size, device, stream, false);
  record("free_completed", ptr, size, device, stream, false);
}

void bind_memory_history(py::module &m) {
  m.def("_record_memory_history", [](const std::string &enabled, const std::string &context,
                                     const std::string &stacks, size_t max_entries) {
    History &h = history();
    torch::installCapturedTracebackPython();
    std::lock_guard<std::mutex> lock(h.mu);
    h.trace = enabled == "all";
    h.state = enabled == "all" || enabled == "state";
    h.state = h.state && context != "none";
    h.cpp_frames = stacks == "all";
    h.free_frames = context == "all";
    h.max_entries = max_entries;
    if (!h.trace) h.traces.clear();
    if (!h.state) h.live.clear();
    g_enabled.store(h.trace || h.state);
  });
  m.def("_memory_snapshot", &snapshot);
}

}  // namespace torch_neuronx
