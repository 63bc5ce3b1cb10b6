#include "trainer/stop_signal.h"

#include <atomic>

#include "core/check.h"

namespace tandem {
namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};

// Lock-free, so the handler may store it. See Note [Stopping on a signal].
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler stores this");

void OnStopSignal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);
}

}  // namespace

StopSignals::StopSignals() {
  TANDEM_CHECK(!g_installed.exchange(true))
      << "StopSignals: another instance is alive; make one per process";
  g_received = 0;
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  // SA_RESETHAND: the default action again after the first signal.
  // SA_RESTART: system calls the signal interrupts carry on.
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  for (int i = 0; i < 3; ++i) {
    TANDEM_CHECK(sigaction(kSignals[i], &action, &previous_[i]) == 0)
        << "StopSignals: cannot install a handler for " << Name(kSignals[i]);
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  g_installed = false;
}

int StopSignals::received() { return g_received.load(); }

std::string StopSignals::Name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(signal);
  }
}

bool AgreeToStop(Communicator& comm, bool local) {
  if (comm.size() == 1) return local;
  float stop = local ? 1.f : 0.f;
  comm.AllReduce(&stop, 1, ReduceOp::kSum)->Wait();
  return stop > 0.f;
}

}  // namespace tandem
