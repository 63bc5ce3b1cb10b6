#include "trainer/step_tracer.h"

#include "core/backend_registry.h"

namespace tandem {

StepTracer::StepTracer(ChromeTrace& trace, int rank, Device device, const Reducer& reducer,
                       const std::string& label)
    : trace_(trace), rank_(rank), backend_(GetBackend(device)), reducer_(reducer) {
  trace_.SetProcessName(rank, "worker " + std::to_string(rank) + " (" + device.ToString() +
                                  (label.empty() ? "" : ", " + label) + ")");
  trace_.SetThreadName(rank, 0, "compute");
  trace_.SetThreadName(rank, 1, "communication");
  hooks_.on_forward_done = [this](Layer& layer) { forward_.push_back({layer.Name(), Mark()}); };
  hooks_.on_backward_done = [this](Layer& layer) {
    backward_layers_.push_back({layer.Name(), Mark()});
  };
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
  backward_layers_.clear();
}

ForwardArgs StepTracer::forward_args() {
  ForwardArgs args;
  args.hooks = &hooks_;
  return args;
}

void StepTracer::LossDone() { loss_ = Mark(); }
void StepTracer::BackwardDone() { backward_ = Mark(); }

void StepTracer::End() {
  AddLayers();
  AddReductions();
}

void StepTracer::AddLayers() {
  const double t0 = trace_.ToMicros(host_start_);
  auto at = [&](const LaneEvent& e) { return t0 + 1000.0 * e.ElapsedMsSince(*start_); };
  auto add = [&](const std::string& name, const char* category, const LaneEvent& from,
                 const LaneEvent& to, size_t index) {
    const double begin = at(from);
    trace_.AddCompleteMicros(name, category, rank_, 0, begin, at(to) - begin,
                             {{"layer", static_cast<double>(index)}});
  };
  const LaneEvent* previous = start_.get();
  for (size_t i = 0; i < forward_.size(); ++i) {
    add("forward " + forward_[i].layer, "forward", *previous, *forward_[i].event, i);
    previous = forward_[i].event.get();
  }
  add("loss", "forward", *previous, *loss_, forward_.size());
  previous = loss_.get();
  for (size_t i = 0; i < backward_layers_.size(); ++i) {
    add("backward " + backward_layers_[i].layer, "backward", *previous,
        *backward_layers_[i].event, i);
    previous = backward_layers_[i].event.get();
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
