// Debug fingerprints of collectives: before each collective every rank
// shares its (sequence number, kind, element count), and if any rank differs
// every rank throws, naming who called what. Without it, a rank that issues
// another collective than its peers pairs mismatched buffers or hangs.
//
//   // Inside a communicator, before issuing collective number `sequence`:
//   CheckFingerprint(host, {sequence, FingerprintKind("AllReduce"), count});
//   // -> tandem::Error "ranks called different collectives: rank 0 called
//   //    AllReduce #3 (4000 bytes) but rank 1 called Broadcast #3 (40 bytes)"
//
// MpiCommunicator exchanges fingerprints with MPI_Allgather itself;
// NcclCommunicator, whose collectives run on the GPU, exchanges them over the
// host communicator it was created with (CheckFingerprint).
#ifndef TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_
#define TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tandem {

struct Fingerprint {
  int64_t sequence = 0;
  int64_t kind = -1;  // FingerprintKind's index
  int64_t count = 0;  // elements (floats)
};

// "AllReduce", "Broadcast", "Barrier", "AllGather", "WindowRegister" -> 0..4;
// -1 otherwise.
int64_t FingerprintKind(const char* kind);

// Throws tandem::Error naming `rank`'s fingerprint and every rank's that
// differs from it; returns if all of `all` (one per rank) agree.
void CheckFingerprintsAgree(const std::vector<Fingerprint>& all, int rank);

// Collective over `host`: all-gathers `mine` (through host.AllGather on
// floats, in 16-bit pieces so every value arrives exactly) and calls
// CheckFingerprintsAgree. Every rank throws the same error on a mismatch.
void CheckFingerprint(Communicator& host, const Fingerprint& mine);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_
