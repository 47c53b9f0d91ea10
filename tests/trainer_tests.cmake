# The bundled trainer's LibTorch test binaries, built two ways: by tests/CMakeLists.txt in the whole
# project (Debian's LibTorch 1.13, launcher mxrun) and by the trainer-only build on a GPU machine
# (scripts/gpu/build-trainer-cuda.sh: PyTorch's LibTorch 2.x with CUDA, launcher that PyTorch's
# torchrun), where the same tests check the code against the other LibTorch.
#   mxrun_trainer_tests      models, gradient reducer, optimizer step, checkpoints ([gpu]: on CUDA)
#   mxrun_trainer_gpu_tests  the train binary on a GPU
# `launcher_definition`: MXRUN_BIN="..." or TORCHRUN_PYTHON="..." (a Python with torch).
function(mxrun_add_trainer_test_binaries launcher_definition)
  add_executable(mxrun_trainer_tests ${PROJECT_SOURCE_DIR}/tests/trainer/trainer_torch_test.cc)
  target_include_directories(mxrun_trainer_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(mxrun_trainer_tests PRIVATE mxrun_catch_main mxrun_trainer_torch)

  add_executable(mxrun_trainer_gpu_tests
    ${PROJECT_SOURCE_DIR}/tests/integration/trainer_gpu_test.cc
    ${PROJECT_SOURCE_DIR}/tests/subprocess.cc)
  target_include_directories(mxrun_trainer_gpu_tests PRIVATE ${PROJECT_SOURCE_DIR})
  # In the whole project the paths come from tests/test_paths.h; the trainer-only build sets them.
  if(MXRUN_TRAINER_ONLY)
    target_compile_definitions(mxrun_trainer_gpu_tests PRIVATE
      TRAIN_BIN="$<TARGET_FILE:train>" ${launcher_definition})
  endif()
  target_link_libraries(mxrun_trainer_gpu_tests PRIVATE mxrun_catch_main mxrun_worker_contract
    nlohmann_json::nlohmann_json)
  add_dependencies(mxrun_trainer_gpu_tests train)
endfunction()
