#include "agent/process/turn_hooks.h"

#include <utility>
#include <vector>

namespace mxrun {

TurnHooks::Hook& TurnHooks::Hook::operator=(Hook&& other) noexcept {
  if (this != &other) {
    Remove();
    hooks_ = std::exchange(other.hooks_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void TurnHooks::Hook::Remove() {
  if (hooks_ != nullptr) std::exchange(hooks_, nullptr)->hooks_.erase(id_);
}

TurnHooks::Hook TurnHooks::Add(Callback callback) {
  const uint64_t id = next_id_++;
  hooks_.emplace(id, std::move(callback));
  return Hook(this, id);
}

void TurnHooks::RunAll() {
  std::vector<uint64_t> ids;
  ids.reserve(hooks_.size());
  for (const auto& [id, callback] : hooks_) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = hooks_.find(id);
    if (it == hooks_.end()) continue;  // taken out by an earlier hook of this turn
    // A copy: the hook may take itself out (its owner destroyed) while it runs.
    const Callback callback = it->second;
    callback();
  }
}

}  // namespace mxrun
