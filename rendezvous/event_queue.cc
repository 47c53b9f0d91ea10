#include "rendezvous/event_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace mxrun {

RendezvousEventQueue::RendezvousEventQueue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

RendezvousEventQueue::~RendezvousEventQueue() {
  if (fd_ >= 0) close(fd_);
}

void RendezvousEventQueue::Post(RendezvousEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  const uint64_t one = 1;
  ssize_t ignored = write(fd_, &one, sizeof one);
  (void)ignored;
}

std::vector<RendezvousEvent> RendezvousEventQueue::Take() {
  uint64_t count = 0;
  ssize_t ignored = read(fd_, &count, sizeof count);
  (void)ignored;
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RendezvousEvent> taken;
  taken.swap(events_);
  return taken;
}

}  // namespace mxrun
