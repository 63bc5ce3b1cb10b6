// The data-parallel reducer: keeps replicas identical by all-reducing
// gradients, overlapped with backward compute.
//
//   Reducer reducer(model, worker.comm);     // broadcasts rank 0's parameters
//   Tensor logits = model.Forward(x_shard);
//   loss.Forward(logits, y_shard, global_batch);  // normalise by the GLOBAL batch
//   optimizer.ZeroGrad();                     // (or before Forward)
//   reducer.Backward(loss.Backward());        // backward + all-reduce
//   optimizer.Step();
//
// How it works: parameters are laid out in buckets in reverse layer order
// (the order backward produces their gradients), and each gradient tensor is
// re-homed as a view into its bucket's flat buffer, so a bucket is all-reduced
// in place with no copies. Backward drives the model layer by layer; when the
// last gradient of a bucket is final, the bucket is handed to a communication
// thread, which all-reduces it while backward continues on earlier layers.
// Backward returns once every bucket has been reduced; only that wait is
// "time waited for communication". See Note [Bucket order] and
// Note [Gradient averaging] in reducer.cc.
#ifndef TANDEM_PARALLEL_REDUCER_H_
#define TANDEM_PARALLEL_REDUCER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "layers/optimizer.h"
#include "layers/sequential.h"
#include "parallel/communicator.h"

namespace tandem {

struct ReducerOptions {
  // Target bucket size: a bucket closes with the parameter that makes it
  // reach this many bytes (so buckets can be larger; a large parameter may
  // share its bucket with the small ones backward finished just before it).
  int64_t bucket_bytes = 4 << 20;
  // false: all-reduce every bucket after backward ends (for measurement).
  bool overlap = true;
  // On GPUs: from the first queued all-reduce to the end of backward, plan
  // backward's GEMMs for this many fewer multiprocessors, which NCCL's
  // kernels hold meanwhile (Backend::SetGemmReserve; Note [GEMM reserve]).
  // 0: GEMMs plan for the whole device.
  int gemm_reserve = 16;
  // With 2+ ranks and overlap: the first this many layers of the model that
  // have parameters (from the input side) compute their parameter gradients
  // before their input gradient (Layer::SetGradientsFirst), so that the
  // all-reduce of the gradients backward reaches last runs beside the rest
  // of backward instead of after it. Note [Gradients first] in reducer.cc.
  // 0: every layer keeps its gradients beside its input gradient.
  int gradients_first_layers = 2;
};

// Timeline of one step, on the steady clock, for tests and traces.
struct ReducerTimeline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point backward_start;
  std::vector<Clock::time_point> layer_done;       // per layer index
  std::vector<Clock::time_point> bucket_start;     // per bucket: all-reduce began
  std::vector<Clock::time_point> bucket_end;       // per bucket: all-reduce ended
  Clock::time_point backward_end;                  // model backward finished
  Clock::time_point step_end;                      // every bucket reduced
  // With record_device_times on a stream-ordered communicator: each
  // bucket's all-reduce as it ran on the communication stream.
  std::vector<Communicator::QueuedSpan> device_bucket_spans;
};

class Reducer {
 public:
  Reducer(Sequential& model, Communicator& comm, ReducerOptions options = {});
  // With several communicators over the same ranks ("lanes", e.g.
  // Worker::gradient_lanes()): on stream-ordered ones (NCCL) bucket b goes to
  // lane b % lanes, so consecutive buckets' all-reduces run at once instead
  // of one after the other (see Note [Lanes]). Host communicators use only
  // the first. lanes[0] also broadcasts the initial parameters.
  Reducer(Sequential& model, std::vector<Communicator*> lanes,
          ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Runs the model's backward from dloss and all-reduces the gradients
  // (unless sync is off). Returns the input gradient.
  Tensor Backward(const Tensor& dloss);

  // Called after each layer's backward (layer index), for traces.
  void set_layer_done_hook(std::function<void(size_t)> hook) { layer_hook_ = std::move(hook); }
  // Records device-side timings of queued all-reduces (costs events).
  void set_record_device_times(bool record) {
    for (Communicator* lane : lanes_) lane->set_record_queue_times(record);
  }
  // The communicators buckets are spread over (one unless lanes were given
  // and are stream-ordered).
  int num_lanes() const { return static_cast<int>(lanes_.size()); }

  // Backward also applies `optimizer` (built over this model's parameters),
  // bucket by bucket, as soon as each bucket's gradients are reduced: on
  // GPUs on the bucket's communication stream, so the update of the last
  // layers overlaps backward of the first ones (Note [Per-bucket update]).
  // optimizer.Step() then only counts the step; call it as before. Nothing
  // may read or change the gradients between Backward and Step (clipping
  // needs the usual separate Step: pass nullptr to go back to it). The
  // optimizer stays handed off if the reducer is destroyed first (the
  // reducer cannot know whether the optimizer still lives): call
  // set_optimizer(nullptr) before that to step it separately again.
  void set_optimizer(Optimizer* optimizer);

  // Gradient accumulation: with sync off, Backward only accumulates local
  // gradients; turn it back on for the last micro-step.
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }

  // Copies rank 0's parameters to every rank (done at construction).
  void BroadcastParameters();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // Parameter names in bucket b, in the order they were laid out.
  std::vector<std::string> BucketParameterNames(int b) const;
  int64_t bucket_elements(int b) const { return buckets_[b].flat.numel(); }
  // Seconds Backward waited for communication after the model's backward
  // finished, in the last step.
  double last_comm_wait_seconds() const { return last_comm_wait_; }
  const ReducerTimeline& last_timeline() const { return timeline_; }

 private:
  struct Bucket {
    Tensor flat;                   // [elements], the gradients live here
    std::vector<size_t> params;    // indices into params_
    int pending = 0;               // gradients not yet final this step
    int running = 0;               // its parameters whose layer's Backward
                                   // has not returned this step
  };

  void BuildBuckets();
  void OnGradientsQueued(size_t layer);
  void OnLayerDone(size_t layer);
  void LaunchReadyBuckets();
  void UpdateFinishedBuckets();  // See Note [Per-bucket update]
  void ReleaseGemmReserve();  // undoes options_.gemm_reserve, if set
  void UpdateBucket(int b);   // optimizer_ over bucket b's parameters
  void CommLoop();
  void Reduce(int bucket);

  Sequential& model_;
  Communicator& comm_;                 // lanes_[0]
  std::vector<Communicator*> lanes_;   // buckets round-robin over these
  ReducerOptions options_;
  bool sync_ = true;

  std::vector<Parameter> params_;
  std::vector<size_t> gradients_first_;           // layers we gave the hint
  std::vector<int> param_bucket_;                 // param index -> bucket
  std::vector<std::vector<size_t>> layer_params_; // layer -> param indices
  std::vector<Bucket> buckets_;
  Optimizer* optimizer_ = nullptr;               // set_optimizer
  std::vector<std::vector<size_t>> bucket_optimizer_params_;  // bucket -> its indices
  int next_to_launch_ = 0;       // See Note [Bucket order]
  int next_to_update_ = 0;       // See Note [Per-bucket update]
  bool gemm_reserved_ = false;   // options_.gemm_reserve is in force
  std::vector<bool> ready_;

  // Communication thread and its queue.
  std::thread comm_thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  int reduced_ = 0;              // buckets finished this step
  bool stopping_ = false;
  std::string comm_error_;

  double last_comm_wait_ = 0.0;
  std::function<void(size_t)> layer_hook_;
  ReducerTimeline timeline_;
};

}  // namespace tandem

#endif  // TANDEM_PARALLEL_REDUCER_H_
