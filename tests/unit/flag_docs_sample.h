#pragma once
// A small program and flag table for the tests of what is written from flag tables: the manual
// page (man_page_test.cc) and the site's reference (markdown_reference_test.cc). One flag of each
// kind: a value with a stand-in variable, a switch with a short name and no file key, a value
// that may be given alone, and an environment-only setting; prose of each block kind.

#include <vector>

#include "launcher/flags/flag_engine.h"
#include "launcher/flags/man_page.h"

namespace mxrun::testing {

inline ProgramFlags SampleProgram() {
  return ProgramFlags{"prog", "prog: a test", "prog 1.2", {"PROG_", "OLD_"}, "flag > env"};
}

inline std::vector<FlagSpec> SampleFlags() {
  FlagSpec value{"nproc_per_node", "", false, "workers per node", "1"};
  value.stand_in_env = "NPROCS";
  FlagSpec boolean{"standalone", "-s", true, "a private rendezvous", ""};
  boolean.file_key = false;
  FlagSpec watch{"watch", "", false, "refresh", ""};
  watch.implicit_value = "2";
  FlagSpec knob =
      EnvSetting("use_agent_store", "TORCHELASTIC_USE_AGENT_STORE", "host the store in the agent");
  return {value, boolean, watch, knob};
}

// DESCRIPTION holds `description` (a paragraph); after the flags, an exit status and examples.
inline ManPageText SampleText(const std::string& description) {
  ManPageText text;
  text.summary = "a test program";
  text.synopsis = "[OPTIONS] ENTRYPOINT";
  text.date = "2026-12-06";
  text.before_options = {{"Description", {{ManBlock::Kind::kParagraph, description}}}};
  text.after_options = {{"Exit status", {{ManBlock::Kind::kTagged, "it worked", "0"}}},
                        {"Examples", {{ManBlock::Kind::kExample, "prog -s x.py\nprog --watch"}}}};
  return text;
}

// A text with only what the page's frame needs, for the real tables' pages.
inline ManPageText BareText() {
  ManPageText text;
  text.summary = "s";
  text.synopsis = "[OPTIONS]";
  text.date = "2026-12-06";
  return text;
}

}  // namespace mxrun::testing
