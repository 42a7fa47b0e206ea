// Kineto PrivateUse1 activity profiler: torch.profiler with
// ProfilerActivity.PrivateUse1 collects one activity per task the stream
// workers run (its interval on the device stream), so exported traces show
// each op's device time on a "neuron:<d> stream <s>" row. Also the legacy
// profiler stubs (timing events around each op on the current stream).
#include "neuron.h"

#include <ThreadUtil.h>
#include <c10/util/ApproximateClock.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <atomic>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

namespace torch_neuronx {
namespace {

// A launch seen while recording: the CPU op's correlation id and the host
// thread and interval of the launch call.
struct Launch {
  uint64_t correlation;
  int64_t t0, t1;
  int32_t thread;
  int device, stream;
  uint64_t seq;
  const char *name;
};

std::atomic<bool> g_recording{false};
std::mutex g_launch_mu;
std::vector<Launch> g_launches;
// The correlation ids of the CPU ops open on this thread (kineto pushes one
// per op it records).
thread_local std::vector<uint64_t> t_correlation;

}  // namespace

bool profiler_recording() { return g_recording.load(std::memory_order_relaxed); }

void profiler_note_launch(tnrt_stream_t *s, uint64_t seq, int64_t t0, int64_t t1,
                          const char *name) {
  Launch l{t_correlation.empty() ? 0 : t_correlation.back(),
           t0,
           t1,
           libkineto::systemThreadId(),
           tnrt_stream_device(s),
           tnrt_stream_index(s),
           seq,
           name};
  std::lock_guard<std::mutex> lock(g_launch_mu);
  g_launches.push_back(l);
}

namespace {

// Offset from the runtime's monotonic clock to the profiler's clock.
int64_t monotonic_to_profiler_ns() { return c10::getTime() - tnrt_now_ns(); }

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    trace_start();
    {
      std::lock_guard<std::mutex> lock(g_launch_mu);
      g_launches.clear();
    }
    g_recording.store(true);
    start_ns_ = c10::getTime();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

  void stop() override {
    // The profiler stops after the user's last op; let queued work finish
    // so its intervals are in the trace (a pending device fault stays for
    // the user's next synchronisation).
    for (int d = 0; d < tnrt_device_count(); d++) tnrt_device_wait(d);
    g_recording.store(false);
    records_ = trace_stop();
    {
      std::lock_guard<std::mutex> lock(g_launch_mu);
      launches_.swap(g_launches);
    }
    offset_ns_ = monotonic_to_profiler_ns();
    end_ns_ = c10::getTime();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger &logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  // Each device task, and the launch call that queued it on the host thread
  // of the CPU op that issued it, joined by a flow (as a CUDA kernel and its
  // cudaLaunchKernel are): the launch is linked to the CPU op.
  void processTrace(libkineto::ActivityLogger &logger,
                    libkineto::getLinkedActivityCallback linked_of, int64_t, int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    std::map<std::tuple<int, int, uint64_t>, const Launch *> by_task;
    for (const Launch &l : launches_) by_task[{l.device, l.stream, l.seq}] = &l;
    int32_t pid = libkineto::processId();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron");
    buffer_->gpuOpCount = static_cast<int>(records_.size());
    int32_t id = 0;
    for (const tnrt_trace_record_t &r : records_) {
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL,
                                std::string(r.name ? r.name : "task"));
      auto &a = *buffer_->activities.back();
      a.startTime = r.start_ns + offset_ns_;
      a.endTime = r.end_ns + offset_ns_;
      a.id = id++;
      a.device = r.device;
      a.resource = r.stream;
      a.threadId = r.stream;
      a.addMetadata("device", r.device);
      a.addMetadata("stream", r.stream);
      a.addMetadata("seq", r.seq);
      auto it = by_task.find({r.device, r.stream, r.seq});
      if (it == by_task.end()) {
        logger.handleGenericActivity(a);
        continue;
      }
      const Launch &l = *it->second;
      const libkineto::ITraceActivity *op =
          linked_of && l.correlation ? linked_of(static_cast<int32_t>(l.correlation)) : nullptr;
      int64_t flow = id;  // unique per task in this trace
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                std::string("neuronLaunchKernel"));
      auto &rt = *buffer_->activities.back();
      rt.startTime = l.t0 + offset_ns_;
      rt.endTime = l.t1 + offset_ns_;
      rt.id = id++;
      rt.device = pid;
      rt.resource = l.thread;
      rt.threadId = l.thread;
      rt.linked = op;
      rt.flow.id = flow;
      rt.flow.type = libkineto::kLinkAsyncCpuGpu;
      rt.flow.start = true;
      rt.addMetadata("correlation", static_cast<int64_t>(l.correlation));
      auto &kernel = *buffer_->activities[buffer_->activities.size() - 2];
      kernel.linked = op;
      kernel.flow.id = flow;
      kernel.flow.type = libkineto::kLinkAsyncCpuGpu;
      kernel.flow.start = false;
      kernel.addMetadata("correlation", static_cast<int64_t>(l.correlation));
      logger.handleGenericActivity(kernel);
      logger.handleGenericActivity(rt);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int32_t, int32_t>> seen;
    std::vector<libkineto::ResourceInfo> out;
    for (const tnrt_trace_record_t &r : records_)
      if (seen.insert({r.device, r.stream}).second)
        out.push_back(
            {r.stream, r.stream, r.device,
             "neuron:" + std::to_string(r.device) + " stream " + std::to_string(r.stream)});
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  std::vector<tnrt_trace_record_t> records_;
  std::vector<Launch> launches_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  int64_t start_ns_ = 0, end_ns_ = 0, offset_ns_ = 0;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string &name() const override { return name_; }
  const std::set<libkineto::ActivityType> &availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType> &, const libkineto::Config &) override {
    return std::make_unique<NeuronProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType> &types,
      const libkineto::Config &config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                libkineto::ActivityType::PRIVATEUSE1_DRIVER,
                                                libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torch_neuronx

namespace torch_neuronx {

// ---------------------------------------------------------------- profiler
// Legacy stubs: each profiled op records a timing event on the current
// stream before and after it, so its device time is measured on the stream.

namespace {
struct NeuronProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex *device, torch::profiler::impl::ProfilerVoidEventStub *event,
              int64_t *cpu_ns) const override {
    c10::DeviceIndex d = current_device();
    if (device) *device = d;
    tnrt_event_t *e = tnrt_event_create(TNRT_EVENT_TIMING);
    tnrt_event_record(e, current_native_stream(d));
    *event = std::shared_ptr<void>(
        e, [](void *p) { tnrt_event_destroy(static_cast<tnrt_event_t *>(p)); });
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub *a,
                const torch::profiler::impl::ProfilerVoidEventStub *b) const override {
    double ms = 0;
    tnrt_event_elapsed_ms(static_cast<tnrt_event_t *>(a->get()),
                          static_cast<tnrt_event_t *>(b->get()), &ms);
    return static_cast<float>(ms * 1000.0);  // microseconds
  }
  void mark(const char *) const override {}
  void rangePush(const char *) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    c10::DeviceIndex prev = current_device();
    for (int d = 0; d < tnrt_device_count(); d++) {
      set_current_device(static_cast<c10::DeviceIndex>(d));
      op(d);
    }
    set_current_device(prev);
  }
  void synchronize() const override {
    for (int d = 0; d < tnrt_device_count(); d++) check(tnrt_device_synchronize(d), "synchronize");
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register_stubs;
}  // namespace

}  // namespace torch_neuronx
