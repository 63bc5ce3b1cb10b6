#include "parallel/collective_fingerprint.h"


#include "core/check.h"

namespace tandem {
namespace {

// Each int64 travels as four floats of 16 bits each: integers below 2^24 are
// exact in a float, and no bit pattern can turn into a NaN on the way.
constexpr int kPieces = 4;
constexpr int kFloatsPerFingerprint = 4 * kPieces;

// FingerprintDType's order.
const DType kDTypes[] = {DType::kFloat32, DType::kBFloat16};
constexpr int64_t kNumDTypes = 2;

void Encode(int64_t value, float* out) {
  const uint64_t bits = static_cast<uint64_t>(value);
  for (int i = 0; i < kPieces; ++i) {
    out[i] = static_cast<float>((bits >> (16 * i)) & 0xFFFF);
  }
}

int64_t Decode(const float* in) {
  uint64_t bits = 0;
  for (int i = 0; i < kPieces; ++i) {
    bits |= static_cast<uint64_t>(in[i]) << (16 * i);
  }
  return static_cast<int64_t>(bits);
}

// "rank 1 called AllReduce #3 (2000 bytes, bfloat16)": bytes and dtype as
// Collective::Name gives them.
std::string Describe(const Fingerprint& f, int rank) {
  const bool known = f.kind >= 0 && f.kind < kNumCollectiveKinds;
  const char* name = known ? ToString(static_cast<CollectiveKind>(f.kind)) : "?";
  std::string text = "rank " + std::to_string(rank) + " called " + name + " #" +
                     std::to_string(f.sequence) + " (";
  if (f.dtype < 0 || f.dtype >= kNumDTypes) {
    return text + std::to_string(f.count) + " elements, dtype " + std::to_string(f.dtype) + ")";
  }
  const DType dtype = kDTypes[f.dtype];
  text += std::to_string(f.count * static_cast<int64_t>(SizeOf(dtype))) + " bytes";
  if (dtype != DType::kFloat32) text += std::string(", ") + DTypeName(dtype);
  return text + ")";
}

bool Same(const Fingerprint& a, const Fingerprint& b) {
  return a.sequence == b.sequence && a.kind == b.kind && a.count == b.count &&
         a.dtype == b.dtype;
}

}  // namespace

int64_t FingerprintKind(CollectiveKind kind) { return static_cast<int64_t>(kind); }

int64_t FingerprintDType(DType dtype) {
  for (int64_t i = 0; i < kNumDTypes; ++i) {
    if (kDTypes[i] == dtype) return i;
  }
  return -1;
}

void CheckFingerprintsAgree(const std::vector<Fingerprint>& all, int rank) {
  TANDEM_CHECK(rank >= 0 && rank < static_cast<int>(all.size()))
      << "rank " << rank << " of " << all.size() << " fingerprints";
  const Fingerprint& mine = all[static_cast<size_t>(rank)];
  std::string disagree;
  for (size_t r = 0; r < all.size(); ++r) {
    if (Same(all[r], mine)) continue;
    disagree += (disagree.empty() ? "" : "; ") + Describe(all[r], static_cast<int>(r));
  }
  TANDEM_CHECK(disagree.empty()) << "ranks called different collectives: "
                                 << Describe(mine, rank) << " but " << disagree;
}

void CheckFingerprint(Communicator& host, const Fingerprint& mine) {
  const int size = host.size();
  std::vector<float> all(static_cast<size_t>(size) * kFloatsPerFingerprint);
  float* slot = all.data() + static_cast<size_t>(host.rank()) * kFloatsPerFingerprint;
  Encode(mine.sequence, slot);
  Encode(mine.kind, slot + kPieces);
  Encode(mine.count, slot + 2 * kPieces);
  Encode(mine.dtype, slot + 3 * kPieces);
  host.AllGather(slot, kFloatsPerFingerprint, all.data())->Wait();
  std::vector<Fingerprint> decoded(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const float* f = all.data() + static_cast<size_t>(r) * kFloatsPerFingerprint;
    decoded[static_cast<size_t>(r)] = {Decode(f), Decode(f + kPieces), Decode(f + 2 * kPieces),
                                       Decode(f + 3 * kPieces)};
  }
  CheckFingerprintsAgree(decoded, host.rank());
}

}  // namespace tandem
