#pragma once
// File-system helpers shared by the launcher and the agent.

#include <string>

namespace mxrun {

// mkdir -p: creates `path` and its missing parents (mode 0755). Returns true when it exists after.
bool MakeDirs(const std::string& path);

// rm -rf: removes `path` and everything below it, without following symbolic links.
void RemoveTree(const std::string& path);

}  // namespace mxrun
