#pragma once
// Where this build's programs and this checkout's files are, for the test programs. The paths are
// in one generated file under the build folder (tests/CMakeLists.txt writes test_paths.cc), not in
// the test files' compile definitions: a clone in another folder (CI's) then compiles only that
// file afresh, and every other test file comes from the compiler cache. tests/CMakeLists.txt
// includes this header into every test program's files (-include), so they name the paths as
// before: MXRUN_BIN, PYTHON_BIN, SCRIPTS_DIR, ... (each a const char*, not a literal).

namespace mxrun::test_paths {

// The project's Python (.venv unless MXRUN_PYTHON) and its torchrun; MXRUN_TEST_TORCH_ENV=VENV
// in the tests' environment puts that environment's in their place (scripts/check-torch215.sh runs
// the torchrun comparisons against PyTorch 2.15 so).
extern const char* const kPythonBin;
extern const char* const kTorchrunBin;
const char* TorchEnvTool(const char* tool, const char* built);
extern const char* const kMxrunBin;
extern const char* const kMxrunMasterBin;
extern const char* const kTestChildBin;
extern const char* const kTcpProxyBin;
extern const char* const kTrainBin;  // "" in a build without the trainer
extern const char* const kFakeNvmlDir;
extern const char* const kTestOutputDir;
extern const char* const kExamplesDir;  // scripts/examples
extern const char* const kScriptsDir;
extern const char* const kTopologiesDir;    // tests/topologies
extern const char* const kPythonModuleDir;  // python/
extern const char* const kPythonTestsDir;   // tests/python
extern const char* const kFaultWorkersDir;  // tests/faults/workers
extern const char* const kContractMd;       // docs/CONTRACT.md

}  // namespace mxrun::test_paths

#define PYTHON_BIN ::mxrun::test_paths::kPythonBin
#define TORCHRUN_BIN ::mxrun::test_paths::kTorchrunBin
#define MXRUN_BIN ::mxrun::test_paths::kMxrunBin
#define MXRUN_MASTER_BIN ::mxrun::test_paths::kMxrunMasterBin
#define TEST_CHILD_BIN ::mxrun::test_paths::kTestChildBin
#define TCP_PROXY_BIN ::mxrun::test_paths::kTcpProxyBin
#define FAKE_NVML_DIR ::mxrun::test_paths::kFakeNvmlDir
#define TEST_OUTPUT_DIR ::mxrun::test_paths::kTestOutputDir
#define EXAMPLES_DIR ::mxrun::test_paths::kExamplesDir
#define SCRIPTS_DIR ::mxrun::test_paths::kScriptsDir
#define TOPOLOGIES_DIR ::mxrun::test_paths::kTopologiesDir
#define PYTHON_MODULE_DIR ::mxrun::test_paths::kPythonModuleDir
#define PYTHON_TESTS_DIR ::mxrun::test_paths::kPythonTestsDir
#define FAULT_WORKERS_DIR ::mxrun::test_paths::kFaultWorkersDir
#define CONTRACT_MD ::mxrun::test_paths::kContractMd
// TRAIN_BIN only where the trainer is built: the trainer-only build (trainer_tests.cmake) sets
// its own.
#ifndef TRAIN_BIN
#define TRAIN_BIN ::mxrun::test_paths::kTrainBin
#endif
