// ProfileRange with an NVTX tool attached, as under Nsight Systems, but with
// tests/core/fake_nvtx_tool.cc as the tool: NVTX loads it from
// NVTX_INJECTION64_PATH on the first range, and it must then see every range,
// nested as opened, with its name. In a build without CUDA, ranges never
// reach NVTX: the same setting leaves them off.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/profile_range.h"

namespace tandem {
namespace {

// The tool's path: $FAKE_NVTX_TOOL where set (tools/device/run_tests.sh,
// which runs the binaries without Bazel), else in this test's runfiles.
std::string ToolPath() {
  if (const char* given = std::getenv("FAKE_NVTX_TOOL")) return given;
  const char* runfiles = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (runfiles == nullptr || workspace == nullptr) return "";
  return std::string(runfiles) + "/" + workspace + "/tests/core/libfake_nvtx_tool.so";
}

TEST(ProfileRangeNvtxTest, AnAttachedToolSeesEveryRange) {
  const std::string path = ToolPath();
  ASSERT_FALSE(path.empty())
      << "run this test with bazel test (it needs TEST_SRCDIR), or set FAKE_NVTX_TOOL";
  // Before the first range, which is when NVTX looks for a tool.
  ASSERT_EQ(setenv("NVTX_INJECTION64_PATH", path.c_str(), /*overwrite=*/1), 0);
  {
    ProfileRange step("step 1");
    ProfileRange forward([] { return std::string("forward fc1"); });
  }
#ifdef TANDEM_WITH_NVTX
  EXPECT_TRUE(ProfileRange::Enabled());
  void* tool = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(tool, nullptr) << "NVTX did not load " << path;
  using EventsFn = void (*)(std::string*);
  auto events_fn = reinterpret_cast<EventsFn>(dlsym(tool, "FakeNvtxToolEvents"));
  ASSERT_NE(events_fn, nullptr);
  std::string events;
  events_fn(&events);
  // The probe (Note [Is a profiler attached] in core/profile_range.cc), then
  // the ranges.
  EXPECT_EQ(events, "+tandem;-;+step 1;+forward fc1;-;-;");
  dlclose(tool);
#else
  EXPECT_FALSE(ProfileRange::Enabled()) << "a build without CUDA records no NVTX ranges";
#endif
}

}  // namespace
}  // namespace tandem
