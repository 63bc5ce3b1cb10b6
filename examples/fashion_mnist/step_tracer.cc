#include "examples/fashion_mnist/step_tracer.h"

#include "core/backend_registry.h"

namespace tandem {

StepTracer::StepTracer(ChromeTrace& trace, int rank, Device device,
                       Sequential& model, Reducer& reducer)
    : trace_(trace), rank_(rank), backend_(GetBackend(device)), model_(model),
      reducer_(reducer) {
  trace_.SetProcessName(rank, "worker " + std::to_string(rank) + " (" +
                                  device.ToString() + ")");
  trace_.SetThreadName(rank, 0, "compute");
  trace_.SetThreadName(rank, 1, "communication");
}

void StepTracer::Begin() {
  host_start_ = ChromeTrace::Clock::now();
  start_ = backend_.Mark();
  forward_.clear();
  forward_.resize(model_.size());
  backward_layers_.clear();
  backward_layers_.resize(model_.size());
  reducer_.set_layer_done_hook([this](size_t i) { backward_layers_[i] = backend_.Mark(); });
  reducer_.set_record_device_times(true);
}

Sequential::LayerDoneFn StepTracer::forward_hook() {
  return [this](size_t i) { forward_[i] = backend_.Mark(); };
}

void StepTracer::LossDone() { loss_ = backend_.Mark(); }
void StepTracer::BackwardDone() { backward_ = backend_.Mark(); }

void StepTracer::End() {
  std::unique_ptr<TimeMarker> end = backend_.Mark();
  reducer_.set_layer_done_hook(nullptr);
  reducer_.set_record_device_times(false);
  const double t0 = trace_.ToMicros(host_start_);
  auto at = [&](const TimeMarker& m) { return t0 + m.MicrosSince(*start_); };
  auto add = [&](const std::string& name, const char* category, int tid,
                 const TimeMarker& from, const TimeMarker& to, size_t layer) {
    const double begin = at(from);
    trace_.AddCompleteMicros(name, category, rank_, tid, begin, at(to) - begin,
                             {{"layer", static_cast<double>(layer)}});
  };
  const TimeMarker* previous = start_.get();
  for (size_t i = 0; i < forward_.size(); ++i) {
    if (!forward_[i]) continue;
    add("forward " + model_.layer(i).Name(), "forward", 0, *previous, *forward_[i], i);
    previous = forward_[i].get();
  }
  add("loss", "forward", 0, *previous, *loss_, model_.size());
  previous = loss_.get();
  for (size_t i = backward_layers_.size(); i-- > 0;) {
    if (!backward_layers_[i]) continue;
    add("backward " + model_.layer(i).Name(), "backward", 0, *previous,
        *backward_layers_[i], i);
    previous = backward_layers_[i].get();
  }
  if (backward_) {
    trace_.AddCompleteMicros("wait for all-reduce", "communication", rank_, 0,
                             at(*previous), at(*backward_) - at(*previous));
    add("optimizer", "optimizer", 0, *backward_, *end, model_.size());
  }

  const ReducerTimeline& timeline = reducer_.last_timeline();
  if (!timeline.device_bucket_spans.empty()) {
    for (size_t b = 0; b < timeline.device_bucket_spans.size(); ++b) {
      const auto& span = timeline.device_bucket_spans[b];
      const double begin = at(*span.start);
      trace_.AddCompleteMicros(
          "all-reduce bucket " + std::to_string(b), "communication", rank_, 1,
          begin, at(*span.end) - begin,
          {{"bucket", static_cast<double>(b)},
           {"elements", static_cast<double>(reducer_.bucket_elements(static_cast<int>(b)))}});
    }
  } else {
    // Host communicators: the communication thread's own clock readings.
    for (size_t b = 0; b < timeline.bucket_start.size(); ++b) {
      if (timeline.bucket_end[b] <= timeline.bucket_start[b]) continue;
      trace_.AddComplete("all-reduce bucket " + std::to_string(b), "communication",
                         rank_, 1, timeline.bucket_start[b], timeline.bucket_end[b],
                         {{"bucket", static_cast<double>(b)},
                          {"elements", static_cast<double>(
                                           reducer_.bucket_elements(static_cast<int>(b)))}});
    }
  }
}

}  // namespace tandem
