#include "launcher/script_head.h"

#include <catch2/catch.hpp>

#include <fstream>

#include "tests/temp_dir.h"

namespace mxrun {
namespace {

TEST_CASE("an ELF file or another interpreter's script is not a Python script", "[entrypoint]") {
  CHECK(NotPythonReason(std::string("\x7f"
                                    "ELF\x02\x01\x01",
                                    7)) == "an ELF executable");
  CHECK(NotPythonReason("#!/bin/bash\necho hi\n") == "a script for /bin/bash (its #! line)");
  CHECK(NotPythonReason("#! /bin/sh -e\n") == "a script for /bin/sh (its #! line)");
  CHECK(NotPythonReason("#!/usr/bin/env bash\n") == "a script for bash (its #! line)");
  CHECK(NotPythonReason("#!/usr/bin/env -S perl -w\n") == "a script for perl (its #! line)");
  CHECK(NotPythonReason("#!/usr/bin/env -u HOME LANG=C node\r\n") ==
        "a script for node (its #! line)");
}

TEST_CASE("Python's own files stay Python's", "[entrypoint]") {
  CHECK_FALSE(NotPythonReason("import torch\n").has_value());
  CHECK_FALSE(NotPythonReason("").has_value());
  CHECK_FALSE(NotPythonReason("#!/usr/bin/python3\nimport os\n").has_value());
  CHECK_FALSE(NotPythonReason("#!/usr/bin/env python3.11\n").has_value());
  CHECK_FALSE(NotPythonReason("#!/opt/venv/bin/python -u\n").has_value());
  CHECK_FALSE(NotPythonReason("#!/usr/bin/env -S uv run --script\n").has_value());
  CHECK_FALSE(NotPythonReason("#!/usr/bin/pypy3\n").has_value());
  CHECK_FALSE(NotPythonReason("#!/usr/bin/env\n").has_value());
  CHECK_FALSE(NotPythonReason("#!\n").has_value());
  // A compiled .pyc and a zip application: Python reads both itself.
  CHECK_FALSE(NotPythonReason(std::string("\xcb\x0d\x0d\x0a\0\0\0\0", 8)).has_value());
  CHECK_FALSE(NotPythonReason("PK\x03\x04").has_value());
}

TEST_CASE("a file's first bytes are read from disk", "[entrypoint]") {
  testing::TempDir dir;
  const std::string script = dir.path() + "/run";
  std::ofstream(script) << "#!/bin/sh\nexec true\n";
  CHECK(NotPythonFileReason(script) == "a script for /bin/sh (its #! line)");
  CHECK(NotPythonFileReason("/bin/true") == "an ELF executable");
  CHECK_FALSE(NotPythonFileReason(dir.path() + "/missing").has_value());
  CHECK_FALSE(NotPythonFileReason(dir.path()).has_value());  // a folder (__main__.py): Python's
}

}  // namespace
}  // namespace mxrun
