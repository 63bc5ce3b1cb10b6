#include "parallel/nccl_handle.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "core/cuda/device_guard.h"
#include "parallel/nccl_check.h"

namespace tandem {
namespace {

std::string DeviceList(const std::vector<int>& devices) {
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    text += (i == 0 ? "cuda:" : ", cuda:") + std::to_string(devices[i]);
  }
  return text;
}

void CheckOneGpuPerRank(const std::vector<int>& devices) {
  TANDEM_CHECK(!devices.empty()) << "an NCCL group needs at least one device";
  for (size_t r = 0; r < devices.size(); ++r) {
    for (size_t q = 0; q < r; ++q) {
      TANDEM_CHECK(devices[q] != devices[r])
          << "NCCL group on " << DeviceList(devices) << ": ranks " << q << " and " << r
          << " are both on cuda:" << devices[r] << "; NCCL needs a GPU of its own for each rank";
    }
  }
}

}  // namespace

NcclTuning NcclTuningFor(int version, int size, bool single_node) {
  NcclTuning tuning;
  if (!single_node) return tuning;
  const bool ctas_set = std::getenv("NCCL_MIN_CTAS") != nullptr ||
                        std::getenv("NCCL_MAX_CTAS") != nullptr;
  tuning.cta_bounds = kNcclHasCtaBounds && version >= 21700 && !ctas_set;
  const char* symmetric = std::getenv("TANDEM_NCCL_SYMMETRIC");
  const bool symmetric_off = symmetric != nullptr && std::string(symmetric) == "0";
  tuning.symmetric_memory = kNcclHasSymmetricMemory && version >= 22700 && size > 1 &&
                            !symmetric_off;
  return tuning;
}

NcclTuning CurrentNcclTuning(int size, bool single_node) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) version = 0;
  return NcclTuningFor(version, size, single_node);
}

ncclConfig_t NcclCommConfig(const NcclTuning& tuning) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
#if TANDEM_NCCL_HAS_CTA_BOUNDS
  if (tuning.cta_bounds) {
    config.minCTAs = kNcclMinCtas;
    config.maxCTAs = kNcclMaxCtas;
  }
#else
  (void)tuning;
#endif
  return config;
}

std::string NcclVersionText() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown version";
  // From NCCL 2.9 on the code is major * 10000 + minor * 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

void LogIfNcclError(ncclResult_t result, const char* call, const std::string& context) {
  if (result == ncclSuccess) return;
  std::fprintf(stderr, "tandem: %s: ignoring %s in %s\n", context.c_str(),
               internal::NcclErrorText(result).c_str(), call);
}

// ---------------------------------------------------------------------------
// NcclComm

NcclComm::NcclComm(NcclComm&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    Abort();
    comm_ = std::exchange(other.comm_, nullptr);
  }
  return *this;
}

void NcclComm::Destroy() {
  if (comm_ == nullptr) return;
  LogIfNcclError(ncclCommDestroy(std::exchange(comm_, nullptr)), "ncclCommDestroy",
                 "NcclComm");
}

void NcclComm::Abort() {
  if (comm_ == nullptr) return;
  LogIfNcclError(ncclCommAbort(std::exchange(comm_, nullptr)), "ncclCommAbort", "NcclComm");
}

NcclComm NcclComm::InitRank(int size, const ncclUniqueId& id, int rank, int device,
                            const NcclTuning& tuning, const std::string& context) {
  cuda::DeviceGuard guard(device);
  ncclConfig_t config = NcclCommConfig(tuning);
  ncclComm_t comm = nullptr;
  // NCCL_CHECK throws at the end of its statement, after `made` holds the
  // handle of a partly made communicator, which it then aborts.
  ncclResult_t result = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  NcclComm made(comm);
  NCCL_CHECK(result) << "creating NCCL rank " << rank << " of " << size << " on cuda:"
                     << device << " (bootstrapped over " << context
                     << "; every rank of a node needs a GPU of its own)";
  return made;
}

std::vector<NcclComm> NcclComm::InitGroup(const std::vector<int>& devices) {
  CheckOneGpuPerRank(devices);
  const int n = static_cast<int>(devices.size());
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id)) << "making the NCCL id for " << DeviceList(devices);
  // What ncclCommInitAll does, with our ncclConfig_t.
  std::vector<ncclComm_t> raw(static_cast<size_t>(n), nullptr);
  ncclResult_t created = ncclGroupStart();
  for (int r = 0; r < n && created == ncclSuccess; ++r) {
    cuda::DeviceGuard guard(devices[r]);
    // Threads of one process: one node.
    ncclConfig_t config = NcclCommConfig(CurrentNcclTuning(n, /*single_node=*/true));
    created = ncclCommInitRankConfig(&raw[r], n, id, r, &config);
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (created == ncclSuccess) created = ended;
  std::vector<NcclComm> comms;
  comms.reserve(raw.size());
  for (ncclComm_t comm : raw) comms.emplace_back(comm);  // aborted if we throw
  NCCL_CHECK(created) << "creating an NCCL communicator of " << n << " ranks on "
                      << DeviceList(devices);
  return comms;
}

// ---------------------------------------------------------------------------
// NcclMemory

NcclMemory::NcclMemory(size_t bytes, const std::string& context) : bytes_(bytes) {
  NCCL_CHECK(ncclMemAlloc(&ptr_, bytes)) << context << ": allocating " << bytes
                                         << " bytes with ncclMemAlloc";
}

NcclMemory::~NcclMemory() { Free(); }

NcclMemory::NcclMemory(NcclMemory&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

NcclMemory& NcclMemory::operator=(NcclMemory&& other) noexcept {
  if (this != &other) {
    Free();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void NcclMemory::Free() {
  if (ptr_ == nullptr) return;
  LogIfNcclError(ncclMemFree(std::exchange(ptr_, nullptr)), "ncclMemFree", "NcclMemory");
  bytes_ = 0;
}

// ---------------------------------------------------------------------------

ncclUniqueId BroadcastNcclUniqueId(Communicator& host) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  unsigned char bytes[sizeof(id.internal)] = {};
  std::vector<float> wire(sizeof(id.internal), 0.f);
  if (host.rank() == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id)) << "making the NCCL id on rank 0 of " << host.Describe();
    std::memcpy(bytes, id.internal, sizeof(bytes));
    for (size_t i = 0; i < wire.size(); ++i) wire[i] = bytes[i];
  }
  host.Broadcast(wire.data(), static_cast<int64_t>(wire.size()), /*root=*/0)->Wait();
  for (size_t i = 0; i < wire.size(); ++i) bytes[i] = static_cast<unsigned char>(wire[i]);
  std::memcpy(id.internal, bytes, sizeof(bytes));
  return id;
}

}  // namespace tandem
