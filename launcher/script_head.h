#pragma once
// What a would-be Python script's first bytes say it is. `mxrun x` runs `python3 -u x`; when x is
// an ELF program or a script for another interpreter (its #! line), Python would answer every
// rank with a SyntaxError ("Non-UTF-8 code starting with '\x95'"), so mxrun names the file for
// what it is instead and suggests --no_python (exit 2 before any worker starts).

#include <optional>
#include <string>
#include <string_view>

namespace mxrun {

// Why a file whose first bytes are `head` is not a Python script, as the end of a sentence
// ("an ELF executable", "a script for /bin/bash (its #! line)"); nullopt when Python may run it:
// text without a #! line, a #! line naming python*, pypy* or uv (`#!/usr/bin/env -S uv run`,
// PEP 723), and anything else Python reads itself (.pyc, zip applications).
std::optional<std::string> NotPythonReason(std::string_view head);

// The same for a file on disk (its first 256 bytes); nullopt when it cannot be read (the
// caller's existence check speaks for a missing file).
std::optional<std::string> NotPythonFileReason(const std::string& path);

}  // namespace mxrun
