#pragma once
// mxrun-master's live status page (`/` on its metrics port): every run with its phase, round,
// restarts and failures by cause, its nodes with their ranks and how long ago each was heard
// from, and its recent events (rounds formed, failures and the re-formations after them) on a
// timeline. One self-contained HTML document: no external assets, no JavaScript; it reloads
// itself every 5 s. Pure: made from MasterState::Snapshot.

#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/master_state/master_state.h"

namespace mxrun {

std::string RenderStatusPage(const std::vector<RunSnapshot>& runs,
                             std::chrono::steady_clock::time_point now);

// Text made safe for HTML (&, <, >, ", ').
// What an etcd-elected mxrun-master replica that does not lead serves at `/`: that it stands
// by, and where the elected master serves (`leader`, "" while none is known).
std::string RenderStandbyPage(const std::string& leader);

std::string HtmlEscape(const std::string& text);

}  // namespace mxrun
