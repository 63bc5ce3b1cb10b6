// Preemption: a signal asks the run to stop at a step boundary instead of
// killing it, so it can save a checkpoint and exit with kPreemptedExitCode.
//
//   StopSignals signals;                        // handlers installed
//   for (...) {
//     Step();
//     if (AgreeToStop(comm, signals.received() != 0)) { Save(); break; }
//   }
//   // destroyed: the previous handlers are back
//
// Note [Stopping on a signal]: the handler only stores the signal's number
// (async-signal-safe) and puts the default action back, so a second signal
// ends the process at once (a second Ctrl-C is not ignored). Workers learn of
// the first at different steps (MPI ranks get it at different times), so
// they agree: every worker contributes its flag to one host all-reduce at
// each step boundary, and all stop after the same step, which keeps their
// collectives paired and makes the checkpoint consistent. Handled: SIGTERM
// (schedulers' preemption), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's
// `--signal=USR1@T` warning, and the one signal mpirun forwards to its ranks
// without then killing them).
#ifndef TANDEM_TRAINER_STOP_SIGNAL_H_
#define TANDEM_TRAINER_STOP_SIGNAL_H_

#include <csignal>
#include <string>

#include "parallel/communicator.h"

namespace tandem {

// The exit status of a run that stopped on a signal, saved what it had and
// can be continued with --resume: EX_TEMPFAIL of sysexits.h ("try again").
constexpr int kPreemptedExitCode = 75;

// Installs the stop handlers for its lifetime; one instance at a time per
// process (threads share it: make it before launching the workers).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received since construction, 0 while none.
  static int received();
  // "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
  static std::string Name(int signal);

 private:
  struct sigaction previous_[3];
};

// True on every worker when any worker's `local` is true: one host
// all-reduce over `comm` (with one worker, no communication).
bool AgreeToStop(Communicator& comm, bool local);

}  // namespace tandem

#endif  // TANDEM_TRAINER_STOP_SIGNAL_H_
