// ProfileRange: a named span of host time that profilers show on their
// timeline, as NVTX ranges (Nsight Systems, Nsight Compute). Tandem marks
// each layer's forward and backward, each gradient bucket's all-reduce, the
// optimizer's updates and the example's steps, so a profile reads like the
// example's --trace:
//
//   void Sequential::...() {
//     ProfileRange range([&] { return "forward " + layer.Name(); });
//     h = layer.Forward(h);
//   }                                     // the range ends here
//
//   ProfileRange range("optimizer step");
//
// Ranges nest per thread: each ends where its scope does. They mark when the
// host ran (queued) the work; Nsight Systems projects them onto the GPU
// kernels that the work launched. To see them:
//
//   bazel build -c opt //examples:fashion_mnist
//   nsys profile -t cuda,nvtx -o step bazel-bin/examples/fashion_mnist --device=cuda --max_steps=50
//   nsys stats --report nvtx_sum step.nsys-rep   # a table per range; or open it in nsys-ui
//
// Cost: in a build without CUDA a range records nothing; with CUDA, NVTX 3
// (header-only, in the toolkit) records it only while a tool is attached.
// Without one, a range costs a call that tests two flags, and a name given
// as a function (the first form above) is never built, so names that need
// formatting cost nothing more.
#ifndef TANDEM_CORE_PROFILE_RANGE_H_
#define TANDEM_CORE_PROFILE_RANGE_H_

#include <functional>
#include <string>
#include <type_traits>
#include <utility>

namespace tandem {

class ProfileRange {
 public:
  explicit ProfileRange(const char* name) {
    if (Enabled()) Push(name);
  }
  explicit ProfileRange(const std::string& name) : ProfileRange(name.c_str()) {}
  // The name comes from `make_name()`, called only when the range is
  // recorded.
  template <typename MakeName,
            typename = std::enable_if_t<std::is_invocable_r_v<std::string, MakeName&>>>
  explicit ProfileRange(MakeName&& make_name) {
    if (Enabled()) Push(std::string(make_name()).c_str());
  }
  ~ProfileRange() {
    if (pushed_) Pop();
  }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

  // Whether ranges are recorded now: an NVTX tool is attached (CUDA builds)
  // or a test listener is set.
  static bool Enabled();

 private:
  void Push(const char* name);
  void Pop();

  bool pushed_ = false;
  bool to_nvtx_ = false;
  bool to_listener_ = false;
  std::string name_;  // kept for the listener only
};

// For tests: `listener(name, true)` when a range begins and
// `listener(name, false)` when it ends, on the thread that opened it, with or
// without a profiler; an empty function removes it. The listener must be
// thread-safe when ranges open on several threads. A range begun without a
// listener does not report its end to one set later.
using ProfileRangeListener = std::function<void(const char* name, bool push)>;
void SetProfileRangeListenerForTesting(ProfileRangeListener listener);

}  // namespace tandem

#endif  // TANDEM_CORE_PROFILE_RANGE_H_
