#include "agent/workers/control_lines.h"

#include "absl/strings/str_cat.h"

namespace mxrun {

void ControlLines::Feed(std::string_view data, const std::function<void(std::string_view)>& on_line,
                        const std::function<void(size_t)>& on_oversize) {
  while (!data.empty()) {
    const size_t newline = data.find('\n');
    const std::string_view piece = data.substr(0, newline);
    if (oversize_bytes_ > 0) {
      oversize_bytes_ += piece.size();
    } else if (partial_.size() + piece.size() > max_line_) {
      oversize_bytes_ = partial_.size() + piece.size();
      partial_.clear();
      partial_.shrink_to_fit();
    } else {
      partial_.append(piece);
    }
    if (newline == std::string_view::npos) return;  // the rest comes with the next read
    if (oversize_bytes_ > 0) {
      on_oversize(oversize_bytes_);
      oversize_bytes_ = 0;
    } else {
      on_line(partial_);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

std::string ControlLines::Dropped(std::string_view who, std::string_view reason) {
  ++drops_;
  if (drops_ > kLoggedDrops) return "";
  return absl::StrCat(std::string(who), ": dropped a control message: ", std::string(reason),
                      drops_ == kLoggedDrops
                          ? "; further dropped messages are counted, not logged, until it ends"
                          : "");
}

}  // namespace mxrun
