// Kineto PrivateUse1 activity profiler: torch.profiler with
// ProfilerActivity.PrivateUse1 collects one activity per task the stream
// workers run (its interval on the device stream), so exported traces show
// each op's device time on a "neuron:<d> stream <s>" row.
#include "neuron.h"

#include <c10/util/ApproximateClock.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <ctime>
#include <set>

namespace torch_neuronx {
namespace {

// Offset from the runtime's monotonic clock to the profiler's clock.
int64_t monotonic_to_profiler_ns() {
  return c10::getTime() - tnrt_now_ns();
}

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    trace_start();
    start_ns_ = c10::getTime();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    // The profiler stops after the user's last op; let queued work finish
    // so its intervals are in the trace (a pending device fault stays for
    // the user's next synchronisation).
    for (int d = 0; d < tnrt_device_count(); d++) tnrt_device_wait(d);
    records_ = trace_stop();
    offset_ns_ = monotonic_to_profiler_ns();
    end_ns_ = c10::getTime();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron");
    buffer_->gpuOpCount = static_cast<int>(records_.size());
    int32_t id = 0;
    for (const tnrt_trace_record_t& r : records_) {
      buffer_->emplace_activity(buffer_->span,
                                libkineto::ActivityType::CONCURRENT_KERNEL,
                                std::string(r.name ? r.name : "task"));
      auto& a = *buffer_->activities.back();
      a.startTime = r.start_ns + offset_ns_;
      a.endTime = r.end_ns + offset_ns_;
      a.id = id++;
      a.device = r.device;
      a.resource = r.stream;
      a.threadId = r.stream;
      a.addMetadata("device", r.device);
      a.addMetadata("stream", r.stream);
      a.addMetadata("seq", r.seq);
      logger.handleGenericActivity(a);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return nullptr;
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int32_t, int32_t>> seen;
    std::vector<libkineto::ResourceInfo> out;
    for (const tnrt_trace_record_t& r : records_)
      if (seen.insert({r.device, r.stream}).second)
        out.push_back({r.stream, r.stream, r.device,
                       "neuron:" + std::to_string(r.device) + " stream " +
                           std::to_string(r.stream)});
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  std::vector<tnrt_trace_record_t> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  int64_t start_ns_ = 0, end_ns_ = 0, offset_ns_ = 0;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>&,
      const libkineto::Config&) override {
    return std::make_unique<NeuronProfilerSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
      libkineto::ActivityType::PRIVATEUSE1_DRIVER,
      libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace
}  // namespace torch_neuronx
