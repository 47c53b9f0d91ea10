#pragma once
// File-system helpers shared by the launcher and the agent.

#include <optional>
#include <string>

namespace mxrun {

// mkdir -p: creates `path` and its missing parents (mode 0755; `mode` for `path` itself). Returns
// true when it exists after.
bool MakeDirs(const std::string& path, unsigned mode = 0755);

// rm -rf: removes `path` and everything below it, without following symbolic links.
void RemoveTree(const std::string& path);

// The whole contents of a file; nullopt when it cannot be opened or read.
std::optional<std::string> ReadWholeFile(const std::string& path);

// The durable half of an atomic file replacement: fsyncs the fully written `temp`, renames it over
// `final_path` and fsyncs the folder, so a crash leaves either the old file or the new one.
// Returns 0 or the errno of the step that failed (`temp` is removed when the rename fails).
int ReplaceFileDurably(const std::string& temp, const std::string& final_path);

}  // namespace mxrun
