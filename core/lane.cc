#include "core/lane.h"

#include <utility>

#include "core/backend.h"
#include "core/check.h"

namespace tandem {

Lane::Lane(Backend* backend, LaneState* state, const char* name)
    : backend_(backend), state_(state), name_(name) {}

Backend& Lane::backend() const {
  TANDEM_CHECK(valid()) << "an op was given no lane (a default-constructed Lane)";
  return *backend_;
}

Device Lane::device() const { return backend().device(); }

std::string Lane::Describe() const {
  if (!valid()) return "no lane";
  return device().ToString() + " " + name_ + " lane";
}

Lane Lane::WithGemmReserve(int multiprocessors) const {
  return backend().ReserveForGemm(*this, multiprocessors);
}

OwnedLane::OwnedLane(Backend& backend, std::unique_ptr<LaneState> state,
                     std::string name)
    : backend_(&backend),
      state_(std::move(state)),
      name_(std::make_unique<std::string>(std::move(name))) {}

Lane OwnedLane::get() const {
  if (state_ == nullptr) return Lane();
  return Lane(backend_, state_.get(), name_->c_str());
}

}  // namespace tandem
