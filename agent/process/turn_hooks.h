#pragma once
// What runs after each turn of the agent's loop: the hang checks, the worker group's state, its
// progress reports and its standbys. Each mechanism adds its own hook and holds the Hook handle,
// which takes the hook out when destroyed, so no hook outlives its owner; the agent's Run only
// ends the turn (EventLoop::EndTurn). Only that outermost loop ends turns: a nested wait (a group
// being stopped, the wait for mxrun's own stop signal) runs the event loop without them, since a
// hook may itself stop the group.

#include <cstdint>
#include <functional>
#include <map>

namespace mxrun {

class TurnHooks {
 public:
  using Callback = std::function<void()>;

  // A hook's handle: destroying it (or the owner it is a member of) takes the hook out.
  class Hook {
   public:
    Hook() = default;
    Hook(Hook&& other) noexcept : hooks_(other.hooks_), id_(other.id_) { other.hooks_ = nullptr; }
    Hook& operator=(Hook&& other) noexcept;
    Hook(const Hook&) = delete;
    Hook& operator=(const Hook&) = delete;
    ~Hook() { Remove(); }
    void Remove();

   private:
    friend class TurnHooks;
    Hook(TurnHooks* hooks, uint64_t id) : hooks_(hooks), id_(id) {}
    TurnHooks* hooks_ = nullptr;  // nullptr: nothing held
    uint64_t id_ = 0;
  };

  TurnHooks() = default;
  TurnHooks(const TurnHooks&) = delete;
  TurnHooks& operator=(const TurnHooks&) = delete;

  // `callback` after every turn from now on, after the hooks added before it.
  [[nodiscard]] Hook Add(Callback callback);
  // Runs the hooks in the order they were added. A hook taken out by an earlier one in the same
  // turn does not run; one added during the turn runs from the next.
  void RunAll();
  size_t size() const { return hooks_.size(); }

 private:
  std::map<uint64_t, Callback> hooks_;  // by id: ids grow, so this is the order they were added
  uint64_t next_id_ = 1;
};

}  // namespace mxrun
