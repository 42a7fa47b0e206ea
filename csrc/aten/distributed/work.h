// A collective's Work (its events on the communication stream, wait and
// exception as NCCL's) and DDP's timer for neuron.
// Part of distributed.cpp's one translation unit, included there only, in
// order (comm.h, work.h, process_group.h, ipc.h): the c10d and pybind
// headers are compiled once (a torch-header unit costs about a minute on two
// cores), the parts are cut by concern.
#pragma once

namespace torch_neuronx {
namespace {

class WorkNeuron : public c10d::Work {
 public:
  WorkNeuron(c10d::OpType type, const char *name, std::shared_ptr<Completion> done,
             std::optional<c10::Device> device, std::vector<at::Tensor> outputs,
             c10::Stream comm_stream)
      : Work(-1, type, name),
        done_(std::move(done)),
        device_(device),
        outputs_(std::move(outputs)) {
    std::vector<c10::Device> devices;
    if (device_) devices.push_back(*device_);
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices);
    if (device_) {
      c10::StreamGuard g(comm_stream);  // the future's event: the end of the task
      future_->markCompleted(c10::IValue(outputs_));
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

  bool isCompleted() override { return !done_->end || tnrt_event_query(done_->end); }
  bool isSuccess() const override { return done_->failure().empty(); }
  std::exception_ptr exception() const override {
    std::string e = done_->failure();
    return e.empty() ? nullptr
                     : std::make_exception_ptr(
                           c10::DistBackendError({__func__, __FILE__, uint32_t(__LINE__)}, e));
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {
    if (!device_ || !done_->end) return;
    check(tnrt_stream_wait_event(current_native_stream(device_->index()), done_->end), "work.wait");
  }
  void blockCurrentStream() override { synchronize(); }
  bool wait(std::chrono::milliseconds timeout) override {
    synchronize();
    if (device_ && done_->end && (blocking_wait() || timeout != kNoTimeout)) {
      tnrt_status_t st = tnrt_event_synchronize(done_->end);
      std::string e = done_->failure();
      if (!e.empty()) C10_THROW_ERROR(DistBackendError, e);
      check(st, "work.wait");
    }
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::shared_ptr<Completion> done_;
  std::optional<c10::Device> device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// DDP's per-iteration timings (Reducer asks the registry for its device's
// timer); host clock, as the CPU's.
class NeuronTimer : public c10d::Timer {
 public:
  explicit NeuronTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    auto a = getTimestamp(start), b = getTimestamp(end);
    if (!a || !b || *b < *a) return std::nullopt;
    return *b - *a;
  }
};

}  // namespace
}  // namespace torch_neuronx

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torch_neuronx::NeuronTimer)
}  // namespace c10d
