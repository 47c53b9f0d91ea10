// The progress marker beside the checkpoint: what a process restarted from the checkpoint reads
// to count the completed steps the failure cost.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "tests/temp_dir.h"
#include "trainer/progress_marker.h"

using namespace mxrun::trainer;
using mxrun::testing::TempDir;

namespace {

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("the progress marker keeps the last recorded step for its run", "[trainer][marker]") {
  TempDir dir;
  const std::string path = ProgressMarkerPath(dir.path() + "/ckpt");  // the folder is created
  {
    ProgressMarker marker(path, "run-a");
    marker.Record(9);
    marker.Record(10);
    marker.Record(1234567);
  }
  CHECK(ReadProgressMarker(path, "run-a") == 1234567);
  // Another run's marker, or none, tells nothing.
  CHECK(!ReadProgressMarker(path, "run-b").has_value());
  CHECK(!ReadProgressMarker(path, "run").has_value());
  CHECK(!ReadProgressMarker(dir.path() + "/none", "run-a").has_value());
  // A new writer starts it afresh: a shorter run id leaves nothing of the longer one behind.
  {
    ProgressMarker marker(path, "r");
    marker.Record(3);
  }
  CHECK(ReadProgressMarker(path, "r") == 3);
  CHECK(!ReadProgressMarker(path, "run-a").has_value());
}

TEST_CASE("a file that is not a progress marker is not read as one", "[trainer][marker]") {
  TempDir dir;
  const std::string path = dir.path() + "/progress";
  for (const std::string& text :
       {std::string(""), std::string("garbage\n"),
        std::string("mxrun-progress 2 00000000000000000012 run\n"),
        std::string("mxrun-progress 1 0000000000000000001x run\n"),
        std::string("mxrun-progress 1 12 run\n"),
        std::string("mxrun-progress 1 99999999999999999999 run\n"),  // over int64
        std::string("mxrun-progress 1 -0000000000000000012 run\n"),
        std::string("mxrun-progress 1 00000000000000000012run\n")}) {
    INFO(text);
    WriteFile(path, text);
    CHECK(!ReadProgressMarker(path, "run").has_value());
  }
  WriteFile(path, "mxrun-progress 1 00000000000000000012 run\n");
  CHECK(ReadProgressMarker(path, "run") == 12);
}

TEST_CASE("a progress marker that cannot be written warns and training goes on",
          "[trainer][marker]") {
  TempDir dir;
  WriteFile(dir.path() + "/file", "");
  // Its folder is a file: nothing can be created under it.
  ProgressMarker marker(ProgressMarkerPath(dir.path() + "/file"), "run");
  marker.Record(1);  // no throw, nothing written
  CHECK(!ReadProgressMarker(ProgressMarkerPath(dir.path() + "/file"), "run").has_value());
}
