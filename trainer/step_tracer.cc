#include "trainer/step_tracer.h"

#include "core/backend_registry.h"

namespace tandem {

StepTracer::StepTracer(ChromeTrace& trace, int rank, Device device,
                       Sequential& model, Reducer& reducer, const std::string& label)
    : trace_(trace), rank_(rank), backend_(GetBackend(device)), model_(model),
      reducer_(reducer) {
  trace_.SetProcessName(rank, "worker " + std::to_string(rank) + " (" + device.ToString() +
                                  (label.empty() ? "" : ", " + label) + ")");
  trace_.SetThreadName(rank, 0, "compute");
  trace_.SetThreadName(rank, 1, "communication");
}

std::unique_ptr<LaneEvent> StepTracer::Mark() {
  std::unique_ptr<LaneEvent> event = backend_.NewEvent(/*timing=*/true);
  backend_.Record(*event, backend_.main_lane());
  return event;
}

void StepTracer::Begin() {
  host_start_ = ChromeTrace::Clock::now();
  start_ = Mark();
  forward_.clear();
  forward_.resize(model_.size());
  backward_layers_.clear();
  backward_layers_.resize(model_.size());
  reducer_.set_layer_done_hook([this](size_t i) { backward_layers_[i] = Mark(); });
  reducer_.set_timed_collectives(true);
}

Sequential::LayerDoneFn StepTracer::forward_hook() {
  return [this](size_t i) { forward_[i] = Mark(); };
}

void StepTracer::LossDone() { loss_ = Mark(); }
void StepTracer::BackwardDone() { backward_ = Mark(); }

void StepTracer::End() {
  reducer_.set_layer_done_hook(nullptr);
  reducer_.set_timed_collectives(false);
  AddLayers();
  AddReductions();
}

void StepTracer::AddLayers() {
  const double t0 = trace_.ToMicros(host_start_);
  auto at = [&](const LaneEvent& e) { return t0 + 1000.0 * e.ElapsedMsSince(*start_); };
  auto add = [&](const std::string& name, const char* category, const LaneEvent& from,
                 const LaneEvent& to, size_t layer) {
    const double begin = at(from);
    trace_.AddCompleteMicros(name, category, rank_, 0, begin, at(to) - begin,
                             {{"layer", static_cast<double>(layer)}});
  };
  const LaneEvent* previous = start_.get();
  for (size_t i = 0; i < forward_.size(); ++i) {
    if (!forward_[i]) continue;
    add("forward " + model_.layer(i).Name(), "forward", *previous, *forward_[i], i);
    previous = forward_[i].get();
  }
  add("loss", "forward", *previous, *loss_, model_.size());
  previous = loss_.get();
  for (size_t i = backward_layers_.size(); i-- > 0;) {
    if (!backward_layers_[i]) continue;
    add("backward " + model_.layer(i).Name(), "backward", *previous, *backward_layers_[i], i);
    previous = backward_layers_[i].get();
  }
  if (backward_) {
    trace_.AddCompleteMicros("wait for reductions and updates", "communication", rank_, 0,
                             at(*previous), at(*backward_) - at(*previous));
  }
}

void StepTracer::AddReductions() {
  const double t0 = trace_.ToMicros(host_start_);
  const ReducerTimeline& timeline = reducer_.last_timeline();
  for (size_t b = 0; b < timeline.bucket_work.size(); ++b) {
    const Work& work = *timeline.bucket_work[b];
    if (work.started() == nullptr || work.finished() == nullptr) continue;
    // Host transports time with the host clock, devices on their lanes;
    // either way against an event of the same kind as start_.
    const double begin = t0 + 1000.0 * work.started()->ElapsedMsSince(*start_);
    const double end = t0 + 1000.0 * work.finished()->ElapsedMsSince(*start_);
    trace_.AddCompleteMicros(
        "all-reduce bucket " + std::to_string(b), "communication", rank_, 1, begin,
        end - begin,
        {{"bucket", static_cast<double>(b)},
         {"elements", static_cast<double>(reducer_.bucket_elements(static_cast<int>(b)))}});
  }
}

}  // namespace tandem
