#include "trainer/program.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <iostream>

#include "trainer/stop_signal.h"
#include "trainer/train_config.h"

namespace tandem {

int RunProgram(const std::function<int()>& body) {
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    if (chdir(dir) != 0) {
      std::cerr << "error: cannot enter " << dir << " (BUILD_WORKING_DIRECTORY, set by bazel run)"
                << std::endl;
      return 1;
    }
  }
  try {
    StopSignals stop_signals;
    return body();
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return kUsageExitCode;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}

}  // namespace tandem
