// Records traced training steps into a ChromeTrace: per worker (pid = rank),
// forward and backward of every layer of the model's tree that reports
// (LayerHooks in layers/layer.h), each span from the layer reported before
// it, on row 0 ("compute"), and each gradient bucket's reduction on row 1
// ("communication").
//
// Times come from timing events (core/lane.h) recorded on the device's main
// lane: the host's monotonic clock on the CPU, CUDA timing events on a GPU;
// the reductions are timed by their Work (events on NCCL's lane, or the host
// transport's progress thread), so the trace shows when the device ran the
// work, not when the host queued it. Each traced step is placed at the host
// time when it started; resolving the events waits for the device, once per
// traced step.
//
//   StepTracer tracer(trace, worker.rank, worker.device, reducer);
//   tracer.Begin();
//   Tensor logits = model.ForwardWith(x, tracer.forward_args());
//   ...  tracer.LossDone();
//   args.hooks = tracer.hooks();
//   reducer.BackwardWith(..., args, GradientSync::kReduce, CollectiveTiming::kTimed);
//   tracer.BackwardDone();
//   tracer.End();
#ifndef TANDEM_TRAINER_STEP_TRACER_H_
#define TANDEM_TRAINER_STEP_TRACER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "report/chrome_trace.h"
#include "layers/layer.h"
#include "parallel/reducer.h"

namespace tandem {

class StepTracer {
 public:
  // `label` (e.g. the precision) joins the worker's name in the trace.
  StepTracer(ChromeTrace& trace, int rank, Device device, const Reducer& reducer,
             const std::string& label = "");

  void Begin();
  // For the step's forward: marks each layer as it returns.
  ForwardArgs forward_args();
  // For the step's backward (BackwardArgs::hooks, which the reducer passes
  // on): marks each layer as it returns.
  const LayerHooks* hooks() const { return &hooks_; }
  void LossDone();
  void BackwardDone();
  // Resolves the step's markers (waits for the device) and adds its events.
  void End();

 private:
  struct LayerMark {
    std::string layer;
    std::unique_ptr<LaneEvent> event;
  };
  // A timing event at the current end of the main lane.
  std::unique_ptr<LaneEvent> Mark();
  void AddLayers();
  void AddReductions();

  ChromeTrace& trace_;
  int rank_;
  Backend& backend_;
  const Reducer& reducer_;  // its last timeline: the step's reductions
  LayerHooks hooks_;  // forward and backward
  ChromeTrace::Clock::time_point host_start_;
  std::unique_ptr<LaneEvent> start_, loss_, backward_;
  std::vector<LayerMark> forward_, backward_layers_;  // in the order reported
};

}  // namespace tandem

#endif  // TANDEM_TRAINER_STEP_TRACER_H_
