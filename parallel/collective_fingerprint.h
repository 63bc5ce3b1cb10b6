// Debug fingerprints of collectives: before each collective every rank
// shares its (sequence number, kind, element count, dtype), and if any rank differs
// every rank throws, naming who called what. Without it, a rank that issues
// another collective than its peers pairs mismatched buffers or hangs.
//
//   // Before issuing collective number `sequence` (the preamble does this):
//   CheckFingerprint(channel, {sequence, FingerprintKind("AllReduce"), count,
//                              FingerprintDType(DType::kBFloat16)});
//   // -> tandem::Error "ranks called different collectives: rank 0 called
//   //    AllReduce #3 (2000 bytes, bfloat16) but rank 1 called AllReduce #3
//   //    (4000 bytes)"
//
// The Communicator preamble does it for every transport when a fingerprint
// channel is set (Communicator::set_fingerprint_channel): another
// communicator over the same ranks, e.g. a second MpiCommunicator, carries
// the exchange (CheckFingerprint), so the checked communicator's own
// sequence of collectives is untouched. ThreadCommunicator also compares
// what every rank called inside each collective, channel or not.
#ifndef TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_
#define TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "parallel/communicator.h"

namespace tandem {

struct Fingerprint {
  int64_t sequence = 0;
  int64_t kind = -1;   // FingerprintKind's number
  int64_t count = 0;   // elements
  int64_t dtype = 0;   // FingerprintDType's index; 0 is float32
};

// The kind's number, 0 to kNumCollectiveKinds - 1 (as it travels).
int64_t FingerprintKind(CollectiveKind kind);
// float32 -> 0, bfloat16 -> 1.
int64_t FingerprintDType(DType dtype);

// Throws tandem::Error naming `rank`'s fingerprint and every rank's that
// differs from it; returns if all of `all` (one per rank) agree.
void CheckFingerprintsAgree(const std::vector<Fingerprint>& all, int rank);

// Collective over `host`: all-gathers `mine` (through host.AllGather on
// floats, in 16-bit pieces so every value arrives exactly), waits for it,
// and calls CheckFingerprintsAgree. Every rank throws the same error on a
// mismatch.
void CheckFingerprint(Communicator& host, const Fingerprint& mine);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_COLLECTIVE_FINGERPRINT_H_
