// RAII for NCCL's handles, and how Tandem creates NCCL communicators.
//
// NcclComm owns an ncclComm_t, NcclMemory a buffer from ncclMemAlloc. Both
// are move-only and release on destruction without throwing; a failed
// release is logged to stderr.
//
//   // One rank per process: rank 0 makes the id, the host communicator
//   // carries it to every rank.
//   const ncclUniqueId id = BroadcastNcclUniqueId(host);
//   NcclComm comm = NcclComm::InitRank(host.size(), id, host.rank(), /*device=*/0,
//       CurrentNcclTuning(host.size(), host.single_node()), host.Describe());
//   NCCL_CHECK(ncclAllReduce(p, p, n, ncclFloat, ncclSum, comm.get(), stream));
//   comm.Destroy();   // the normal end; dropping it instead aborts it
//
// Every communicator made here is blocking; on one node it runs each
// collective on kNcclMinCtas to kNcclMaxCtas CTAs (Note [NCCL tuning]).
#ifndef TANDEM_PARALLEL_NCCL_HANDLE_H_
#define TANDEM_PARALLEL_NCCL_HANDLE_H_

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace tandem {

// ncclConfig_t::minCTAs: as many SMs as backward's GEMMs leave to NCCL
// (ReducerOptions::gemm_reserve), so that all-reduces beside GEMMs keep up.
constexpr int kNcclMinCtas = 16;
// ncclConfig_t::maxCTAs: NCCL's own default on Hopper (NCCL_MAX_CTAS).
constexpr int kNcclMaxCtas = 32;

// What the NCCL headers this is built against offer (Note [NCCL tuning]).
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 17, 0)
#define TANDEM_NCCL_HAS_CTA_BOUNDS 1
#else
#define TANDEM_NCCL_HAS_CTA_BOUNDS 0
#endif
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define TANDEM_NCCL_HAS_SYMMETRIC_MEMORY 1
#else
#define TANDEM_NCCL_HAS_SYMMETRIC_MEMORY 0
#endif
constexpr bool kNcclHasCtaBounds = TANDEM_NCCL_HAS_CTA_BOUNDS != 0;
constexpr bool kNcclHasSymmetricMemory = TANDEM_NCCL_HAS_SYMMETRIC_MEMORY != 0;

// Note [NCCL tuning]
// Two NCCL settings are Tandem's (Note [Symmetric memory] in
// nccl_reduce_buffer.cc): kNcclMinCtas..kNcclMaxCtas CTAs per collective,
// and reduce buffers in symmetric memory. Both are tuned for GPUs of one
// node (NCCL documents its symmetric kernels as single-node), so a
// communicator spanning nodes gets neither, and each needs an NCCL that has
// it: the CTA bounds came with NCCL 2.17, symmetric memory with 2.27 (built
// against and loaded at run time). The environment has the last word:
// NCCL_MIN_CTAS or NCCL_MAX_CTAS leave the bounds to NCCL,
// TANDEM_NCCL_SYMMETRIC=0 turns symmetric memory off.
struct NcclTuning {
  bool cta_bounds = false;
  bool symmetric_memory = false;
};
// The tuning for `size` ranks, all on one node or not, with NCCL `version`
// (ncclGetVersion's code) loaded, in this environment.
NcclTuning NcclTuningFor(int version, int size, bool single_node);
// NcclTuningFor with the NCCL loaded now.
NcclTuning CurrentNcclTuning(int size, bool single_node);

// Blocking, with the CTA bounds when `tuning` has them (NCCL refuses a
// config that sets one bound without the other).
ncclConfig_t NcclCommConfig(const NcclTuning& tuning);

// "2.28.9": the version of the NCCL library loaded at run time.
std::string NcclVersionText();

// For destructors and abort paths, which must not throw: logs a result other
// than ncclSuccess to stderr, naming `call` and `context`.
void LogIfNcclError(ncclResult_t result, const char* call, const std::string& context);

class NcclComm {
 public:
  NcclComm() = default;
  // Takes ownership of `comm` (may be null).
  explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
  // Aborts a communicator still held (an error path): ncclCommAbort never
  // waits for other ranks, where ncclCommDestroy may.
  ~NcclComm() { Abort(); }
  NcclComm(NcclComm&& other) noexcept;
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Rank `rank` of `size` on GPU `device`, joining the ranks that use `id`.
  // Collective: every rank must call it. Throws tandem::Error naming the
  // rank, the device and `context` (the bootstrap's communicator).
  static NcclComm InitRank(int size, const ncclUniqueId& id, int rank, int device,
                           const NcclTuning& tuning, const std::string& context);
  // Every rank of one communicator at once, rank r on devices[r], from the
  // calling thread in one NCCL group: all exist or none does (no rank waits
  // for one that never joined). Throws for an empty list, a device named
  // twice (NCCL needs a GPU per rank) or an NCCL failure.
  static std::vector<NcclComm> InitGroup(const std::vector<int>& devices);

  ncclComm_t get() const { return comm_; }
  explicit operator bool() const { return comm_ != nullptr; }

  // The normal end: ncclCommDestroy, after the caller has made sure no work
  // of this rank still runs on the device. Logs a failure; never throws.
  void Destroy();
  // ncclCommAbort: NCCL's kernels of this rank still on the device exit and
  // its host-side waits return. Logs a failure; never throws. Either call
  // leaves this empty.
  void Abort();

 private:
  ncclComm_t comm_ = nullptr;
};

// Device memory from ncclMemAlloc (what NCCL can register as a symmetric
// window), freed with ncclMemFree.
class NcclMemory {
 public:
  NcclMemory() = default;
  // Throws tandem::Error naming `context` if NCCL cannot allocate.
  NcclMemory(size_t bytes, const std::string& context);
  ~NcclMemory();
  NcclMemory(NcclMemory&& other) noexcept;
  NcclMemory& operator=(NcclMemory&& other) noexcept;
  NcclMemory(const NcclMemory&) = delete;
  NcclMemory& operator=(const NcclMemory&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void Free();

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Rank 0 of `host` makes an ncclUniqueId (ncclGetUniqueId) and every rank
// returns a copy, sent through host.Broadcast with each byte as one float
// (exact, whatever the transport does with NaN bit patterns). Collective
// over host; waits for the broadcast. Needs no GPU.
ncclUniqueId BroadcastNcclUniqueId(Communicator& host);

}  // namespace tandem

#endif  // TANDEM_PARALLEL_NCCL_HANDLE_H_
