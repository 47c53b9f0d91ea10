#include "rendezvous/master_server/status_page.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mxrun {
namespace {

constexpr double kLateSeconds = 3.0;  // a node not heard from for this long is shown as late

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f s" : "%.0f s", s);
  return text;
}

const char* kStyle =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:left}th{background:#f2f2f2}.late{background:#ffe3c2}"
    ".straggler{background:#ffd0d0;font-weight:bold}"
    ".phase-running{color:#11772d}.phase-failed{color:#b00020}.phase-waiting{color:#8a6d00}"
    ".timeline{position:relative;height:28px;border-bottom:2px solid #888;margin:1em 0 .3em}"
    ".mark{position:absolute;bottom:-7px;width:12px;height:12px;border-radius:6px;"
    "margin-left:-6px}"
    ".k-round{background:#2e7d32}.k-failure,.k-failed,.k-timeout{background:#c62828}"
    ".k-reforming{background:#ef6c00}.k-succeeded{background:#1565c0}.k-recovered{background:#"
    "00897b}"
    ".k-straggler{background:#8e24aa}.k-excluded{background:#5d4037}"
    ".k-readmitted{background:#78909c}.k-unhealthy{background:#000}"
    "ol{padding-left:1.2em}li{margin:.15em 0}.muted{color:#777}";

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderStatusPage(const std::vector<RunSnapshot>& runs,
                             std::chrono::steady_clock::time_point now) {
  auto ago = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  };
  std::string h = absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"5\"><title>mxrun-master</title><style>",
      kStyle, "</style></head><body><h1>mxrun-master: ", runs.size(),
      runs.size() == 1 ? " run" : " runs", "</h1>");
  if (runs.empty()) h += "<p class=\"muted\">No runs yet.</p>";
  for (const RunSnapshot& run : runs) {
    const std::string id = HtmlEscape(run.run_id);
    absl::StrAppend(&h, "<h2>run ", id, ": <span class=\"phase-", HtmlEscape(run.phase), "\">",
                    HtmlEscape(run.phase), "</span></h2><p>round ", run.round, ", nodes ",
                    run.job.min_nodes, ":", run.job.max_nodes, ", world size ", run.world_size,
                    ", restarts ", run.restarts_spent, " of ", run.job.max_restarts);
    std::string failures;
    for (const auto& [cause, count] : run.failures) {
      absl::StrAppend(&failures, failures.empty() ? "" : ", ", HtmlEscape(cause), " ", count);
    }
    absl::StrAppend(&h, failures.empty() ? "; no failures" : "; failures: " + failures, "</p>");
    for (const std::string& line : run.unhealthy) {
      absl::StrAppend(&h, "<p class=\"late\">unhealthy: ", HtmlEscape(line), "</p>");
    }
    if (!run.restarts.empty()) {
      // Each restart phase by phase: the slowest node's seconds per phase; "?" where none knew.
      h += "<table><tr><th>restart into round</th><th>cause</th><th>stop</th><th>re-form</th>"
           "<th>start</th><th>first step</th><th>in all</th><th>nodes</th></tr>";
      auto cell = [](double s) {
        return s < 0 ? std::string("<td>?</td>") : absl::StrFormat("<td>%.3f s</td>", s);
      };
      for (const RestartPhases& r : run.restarts) {
        absl::StrAppend(&h, "<tr><td>", r.round, r.in_process ? " (in-process)" : "", "</td><td>",
                        HtmlEscape(r.cause), "</td>", cell(r.stop_s), cell(r.reform_s),
                        cell(r.start_s), cell(r.first_step_s), cell(r.TotalSeconds()), "<td>",
                        r.nodes, "</td></tr>");
      }
      h += "</table>";
    }

    // Nodes, with the global ranks each holds (ranks follow node ranks).
    h += "<table><tr><th>node</th><th>host</th><th>address</th><th>ranks</th><th>state</th>"
         "<th>last heard</th></tr>";
    std::vector<const MemberSnapshot*> ordered;
    for (const MemberSnapshot& m : run.members) ordered.push_back(&m);
    int base = 0;
    for (const MemberSnapshot* m : ordered) {
      const double seen = static_cast<double>(m->since_last_seen.count()) / 1000.0;
      std::string ranks = "-";
      if (m->node_rank >= 0 && m->state != "waiting") {
        ranks = m->desc.local_world_size == 1
                    ? std::to_string(base)
                    : absl::StrCat(base, "-", base + m->desc.local_world_size - 1);
        base += m->desc.local_world_size;
      }
      absl::StrAppend(&h, "<tr", seen > kLateSeconds ? " class=\"late\"" : "", "><td>",
                      m->node_rank >= 0 ? std::to_string(m->node_rank) : "-", "</td><td>",
                      HtmlEscape(m->desc.host), "</td><td>", HtmlEscape(m->desc.address),
                      "</td><td>", ranks, "</td><td>", HtmlEscape(m->state),
                      m->note.empty() ? "" : absl::StrCat(": ", HtmlEscape(m->note)), "</td><td>",
                      Seconds(seen), " ago</td></tr>");
    }
    h += "</table>";

    // Ranks, from the progress their agents pass on with each heartbeat.
    std::string ranks;
    for (const MemberSnapshot& m : run.members) {
      for (const RankSnapshot& r : m.ranks) {
        char step_time[32] = "-";
        char rate[32] = "-";
        if (r.step_seconds >= 0)
          std::snprintf(step_time, sizeof step_time, "%.3f s", r.step_seconds);
        if (r.step_seconds > 0) std::snprintf(rate, sizeof rate, "%.2f", 1.0 / r.step_seconds);
        absl::StrAppend(&ranks, "<tr", r.straggler ? " class=\"straggler\"" : "", "><td>",
                        r.global_rank, "</td><td>", HtmlEscape(m.desc.host), "</td><td>",
                        r.local_rank, "</td><td>", r.step, "</td><td>", step_time, "</td><td>",
                        rate, "</td><td>", Seconds(r.since_report_s), " ago</td><td>",
                        r.straggler ? "straggler" : "", "</td></tr>");
      }
    }
    if (ranks.empty()) {
      h += "<p class=\"muted\">No rank has reported progress in this round (workers report "
           "it on their control channel: see mxrun's docs/guide/your-script.md).</p>";
    } else {
      absl::StrAppend(&h,
                      "<table><tr><th>rank</th><th>host</th><th>local rank</th><th>step</th>"
                      "<th>step time</th><th>steps/s</th><th>last report</th><th></th></tr>",
                      ranks, "</table>");
    }

    // The timeline: each event placed along the span from the oldest shown to now.
    if (!run.history.empty()) {
      const double span = std::max(1.0, ago(run.history.front().at));
      h += "<div class=\"timeline\" title=\"oldest event on the left, now on the right\">";
      for (const RunEvent& e : run.history) {
        const double left = 100.0 * (1.0 - ago(e.at) / span);
        char pos[32];
        std::snprintf(pos, sizeof pos, "%.1f", std::clamp(left, 0.0, 100.0));
        absl::StrAppend(&h, "<span class=\"mark k-", HtmlEscape(e.kind), "\" style=\"left:", pos,
                        "%\" title=\"", HtmlEscape(e.text), "\"></span>");
      }
      absl::StrAppend(&h, "</div><p class=\"muted\">the last ", Seconds(span),
                      "; newest first:</p><ol>");
      for (auto it = run.history.rbegin(); it != run.history.rend(); ++it) {
        absl::StrAppend(&h, "<li><span class=\"mark k-", HtmlEscape(it->kind),
                        "\" style=\"position:static;display:inline-block\"></span> ",
                        Seconds(ago(it->at)), " ago, ", HtmlEscape(it->kind), ": ",
                        HtmlEscape(it->text), "</li>");
      }
      h += "</ol>";
    }
  }
  h += "</body></html>\n";
  return h;
}

std::string RenderStandbyPage(const std::string& leader) {
  return absl::StrCat(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"5\"><title>mxrun-master (standing by)</title>"
      "<style>",
      kStyle,
      "</style></head><body><h1>mxrun-master: standing by</h1><p>This replica "
      "does not lead the rendezvous now; ",
      leader.empty() ? std::string("no elected master is known yet.")
                     : absl::StrCat("the elected master serves the rendezvous at ",
                                    HtmlEscape(leader), " (its own metrics port has the runs)."),
      "</p></body></html>\n");
}

}  // namespace mxrun
