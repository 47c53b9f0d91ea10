#pragma once
// A thread-safe queue of rendezvous events with an eventfd that is readable while it is non-empty,
// so that the agent's epoll loop wakes up for events produced on any thread.

#include <mutex>
#include <vector>

#include "rendezvous/rendezvous.h"

namespace mxrun {

class RendezvousEventQueue {
 public:
  RendezvousEventQueue();
  ~RendezvousEventQueue();
  RendezvousEventQueue(const RendezvousEventQueue&) = delete;
  RendezvousEventQueue& operator=(const RendezvousEventQueue&) = delete;

  void Post(RendezvousEvent event);
  std::vector<RendezvousEvent> Take();  // drains the queue and the eventfd
  int fd() const { return fd_; }

 private:
  int fd_;
  std::mutex mutex_;
  std::vector<RendezvousEvent> events_;
};

}  // namespace mxrun
