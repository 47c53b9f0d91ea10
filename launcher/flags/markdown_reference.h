#pragma once
// A program's flag reference as a Markdown page, written from the same flag table and prose as its
// manual page (man_page.h): the guide's site (scripts/build-docs.sh) shows it, so the reference
// there names exactly the flags the program accepts, each with its other spelling, default,
// environment variables and config-file key, and cannot drift from `--help` or `man`.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "launcher/flags/flag_engine.h"
#include "launcher/flags/man_page.h"

namespace mxrun {

// The page: a title, the synopsis, the sections before, "Options" (one heading per flag, so each
// has an anchor; env_only settings under "Environment" instead), "Environment", then the sections
// after. `source` names what wrote it (said at the top: edit that, not the page).
std::string MarkdownReference(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                              const ManPageText& text, absl::string_view source);

// Text that Markdown shows as it is: \ ` * _ [ ] < > # | escaped.
std::string MarkdownEscape(absl::string_view text);

}  // namespace mxrun
