# The bundled trainer's GPU tests (label gpu), built two ways: by tests/CMakeLists.txt in the whole
# project, where the launcher is mxrun, and by the trainer-only build on a GPU machine
# (scripts/build-trainer-cuda.sh), where it is the torchrun of the PyTorch the trainer links.
# `launcher_definition`: MXRUN_BIN="..." or TORCHRUN_PYTHON="..." (a Python with torch).
function(mxrun_add_trainer_gpu_tests launcher_definition)
  add_executable(mxrun_trainer_gpu_tests
    ${PROJECT_SOURCE_DIR}/tests/integration/trainer_gpu_test.cc
    ${PROJECT_SOURCE_DIR}/tests/subprocess.cc)
  target_include_directories(mxrun_trainer_gpu_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(mxrun_trainer_gpu_tests PRIVATE
    TRAIN_BIN="$<TARGET_FILE:train>" ${launcher_definition})
  target_link_libraries(mxrun_trainer_gpu_tests PRIVATE mxrun_catch_main mxrun_worker_contract
    nlohmann_json::nlohmann_json)
  add_dependencies(mxrun_trainer_gpu_tests train)
endfunction()
