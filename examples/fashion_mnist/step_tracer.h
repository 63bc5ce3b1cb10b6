// Records traced training steps into a ChromeTrace: per worker (pid = rank),
// forward and backward of every layer and the optimizer on row 0 ("compute"),
// and each gradient bucket's all-reduce on row 1 ("communication").
//
// Times come from TimeMarkers (core/backend.h): the host's monotonic clock
// on the CPU, CUDA timing events on the compute stream on a GPU, and events
// on NCCL's stream for its all-reduces, so the trace shows when the device
// ran the work, not when the host queued it. Each traced step is placed at
// the host time when it started; resolving the markers waits for the device,
// once per traced step.
//
//   StepTracer tracer(trace, worker.rank, worker.device, model, reducer);
//   tracer.Begin();
//   Tensor logits = model.Forward(x, tracer.forward_hook());
//   ...  tracer.LossDone();  reducer.Backward(...);  tracer.BackwardDone();
//   optimizer.Step();  tracer.End();
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_STEP_TRACER_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_STEP_TRACER_H_

#include <memory>
#include <vector>

#include "core/backend.h"
#include "report/chrome_trace.h"
#include "layers/sequential.h"
#include "parallel/reducer.h"

namespace tandem {

class StepTracer {
 public:
  StepTracer(ChromeTrace& trace, int rank, Device device, Sequential& model,
             Reducer& reducer);

  void Begin();
  Sequential::LayerDoneFn forward_hook();
  void LossDone();
  void BackwardDone();
  // Resolves the step's markers (waits for the device) and adds its events.
  void End();

 private:
  ChromeTrace& trace_;
  int rank_;
  Backend& backend_;
  Sequential& model_;
  Reducer& reducer_;
  ChromeTrace::Clock::time_point host_start_;
  std::unique_ptr<TimeMarker> start_, loss_, backward_;
  std::vector<std::unique_ptr<TimeMarker>> forward_, backward_layers_;
};

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_STEP_TRACER_H_
