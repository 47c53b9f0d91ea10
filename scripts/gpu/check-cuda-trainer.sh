#!/usr/bin/env bash
# The CUDA trainer, built and checked on a machine without a GPU (scripts/test.sh runs this in CI).
#
#   scripts/gpu/check-cuda-trainer.sh [BUILD_DIR]      (default: build-cuda)
#
# 1. makes .venv-cuda (PyTorch 2.15.0, CUDA 13, with its NCCL wheel; scripts/python-env.sh) and
#    builds the trainer against it with scripts/gpu/build-trainer-cuda.sh, the very script a GPU
#    machine runs, so MXRUN_WITH_CUDA and MXRUN_WITH_NCCL are on;
# 2. checks that `train --version` says CUDA and NCCL are built in, and that every shared library
#    of the binary resolves (ldd), LibTorch's CUDA and NCCL ones among them;
# 3. runs the trainer's LibTorch tests that need no GPU, built against that LibTorch;
# 4. trains 2 CPU workers over Gloo under mxrun (build/bin/mxrun, from scripts/build.sh) with that
#    binary: a CUDA build of PyTorch runs on the CPU without a driver;
# 5. asks it for --device cuda and --backend nccl with no GPU: exit 2, one line, no stack trace;
# 6. runs scripts/gpu/run-all.sh as far as a machine without a GPU goes;
# 7. recovers a Python DDP job in-process through 2.15's torch.distributed._reconfigure (the
#    mxrun module, MXRUN_RECONFIGURE=1), and an FSDP2 job with it asked for, Gloo on the CPU.
# (scripts/check-torch215.sh runs this environment's TCPStore clients and torchrun against mxrun.)
# A GPU machine runs the GPU side of the same binary (scripts/gpu/, issue 28).
#
# About 5.5 GB of wheels (from this machine's disk) and ~10 minutes on 2 cores the first time;
# later runs reuse the environment and ccache. Prints "check-cuda-trainer: N passed, N failed".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
build_cuda="${1:-$root/build-cuda}"
mxrun_bin="$build/bin/mxrun"
[[ -x "$mxrun_bin" ]] || { echo "check-cuda-trainer: $mxrun_bin is missing: run scripts/build.sh first" >&2; exit 2; }

venv_cuda=$("$root/scripts/python-env.sh" cuda)
PYTHON="$venv_cuda/bin/python3" "$root/scripts/gpu/build-trainer-cuda.sh" "$build_cuda"
train="$build_cuda/bin/train"

passed=0
failed=0
ok() { echo "check-cuda-trainer: ok: $*"; passed=$((passed + 1)); }
bad() { echo "check-cuda-trainer: FAILED: $*"; failed=$((failed + 1)); }

# 2. What it was built with, and its libraries.
version=$("$train" --version 2>&1) || true
echo "check-cuda-trainer: train --version: $version"
if [[ "$version" == *"CUDA: yes"* && "$version" == *"NCCL: yes"* ]]; then
  ok "built with CUDA and NCCL ($version)"
else
  bad "train --version does not say CUDA and NCCL are built in"
fi
libs=$(ldd "$train")
if grep -q "not found" <<<"$libs"; then
  bad "unresolved libraries: $(grep 'not found' <<<"$libs" | tr -s ' \t\n' ' ')"
else
  ok "every shared library resolves ($(wc -l <<<"$libs") of them)"
fi
for lib in libtorch_cuda.so libc10_cuda.so libnccl.so libcudart.so; do
  line=$(grep -m1 "$lib" <<<"$libs" || true)
  if [[ -n "$line" && "$line" == *"=> /"* ]]; then
    ok "$lib resolves: $(awk '{print $3}' <<<"$line")"
  elif [[ "$lib" == libnccl.so || "$lib" == libcudart.so ]] && [[ -z "$line" ]]; then
    # Loaded by libtorch_cuda.so rather than linked by train itself: found through it.
    dep=$(ldd "$(grep -m1 libtorch_cuda.so <<<"$libs" | awk '{print $3}')" | grep -m1 "$lib" || true)
    if [[ "$dep" == *"=> /"* ]]; then ok "$lib resolves through libtorch_cuda.so: $(awk '{print $3}' <<<"$dep")"; else bad "$lib is not resolved"; fi
  else
    bad "$lib: ${line:-not linked}"
  fi
done

torch_lib=$("$venv_cuda/bin/python3" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
if gloo=$(bash "$root/tests/check_no_gloo_symbols.sh" "$train" "$torch_lib/libtorch_cpu.so" 2>&1); then
  ok "${gloo#ok: }"
else
  bad "$gloo"
fi

# 3. The trainer's LibTorch tests that need no GPU, on this LibTorch.
if [[ -x "$build_cuda/bin/mxrun_trainer_tests" ]]; then
  if "$build_cuda/bin/mxrun_trainer_tests" "~[gpu]" >"$build_cuda/trainer_tests.log" 2>&1; then
    ok "the trainer's LibTorch tests pass on the CUDA LibTorch ($(grep -m1 'All tests passed' "$build_cuda/trainer_tests.log"))"
  else
    bad "the trainer's LibTorch tests on the CUDA LibTorch: see $build_cuda/trainer_tests.log"
    tail -30 "$build_cuda/trainer_tests.log"
  fi
else
  bad "mxrun_trainer_tests was not built in $build_cuda"
fi

# 4. Two CPU workers over Gloo under mxrun.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
small=(--width 8 --synthetic_train 512 --synthetic_test 128 --batch_size 32 --epochs 1 --max_steps 6
       --log_every 3 --metrics_file "$work/metrics.jsonl" --ckpt_dir "$work/ckpt")
if "$mxrun_bin" --standalone --nproc_per_node=2 --no_python "$train" --device cpu --backend gloo "${small[@]}" \
     >"$work/run.log" 2>&1 \
   && grep -q '"event":"done"' "$work/metrics.jsonl" \
   && grep -q '"world_size":2' "$work/metrics.jsonl" \
   && grep -q '"backend":"gloo"' "$work/metrics.jsonl"; then
  ok "the CUDA build trained 2 CPU workers over Gloo under mxrun ($(grep -c '"event":"step"' "$work/metrics.jsonl") step records)"
else
  bad "2 CPU workers under mxrun"
  tail -20 "$work/run.log"
fi

# 5. Asked for the GPU where there is none: exit 2, one line, no stack trace.
if have_nvidia_gpu; then
  echo "check-cuda-trainer: a GPU is visible: the no-GPU answers are not checked here"
else
  for flags in "--device cuda" "--backend nccl"; do
    rc=0
    # shellcheck disable=SC2086  # two words on purpose
    env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u LOCAL_RANK \
      "$train" $flags "${small[@]}" >"$work/out" 2>"$work/err" || rc=$?
    lines=$(grep -c . "$work/err" || true)
    if [[ $rc == 2 && $lines == 1 ]] && ! grep -qiE "exception raised from|frame #|backtrace" "$work/err"; then
      ok "train $flags with no GPU: exit 2: $(cat "$work/err")"
    else
      bad "train $flags with no GPU: exit $rc, $lines lines on stderr: $(head -c 600 "$work/err")"
    fi
  done
fi

# 6. The GPU machine's script, as far as a machine without a GPU goes: mxrun bundled with its
#    libraries (scripts/gpu/bundle-mxrun.sh), then scripts/gpu/run-all.sh against this build.
if "$root/scripts/gpu/bundle-mxrun.sh" "$work/bundle" >"$work/bundle.log" 2>&1; then
  ok "$(tail -1 "$work/bundle.log")"
  rc=0
  STEPS=preflight,build,gpu-tests,mxrun-train,ddp-nccl,python-nccl,fsdp2-nccl,bench-r18 TOTAL_BUDGET=600 \
    PYTHON="$venv_cuda/bin/python3" BUILD_DIR="$build_cuda" BUNDLE="$work/bundle" \
    "$root/scripts/gpu/run-all.sh" "$work/gpu-out" >"$work/run-all.log" 2>&1 || rc=$?
  summary="$work/gpu-out/summary.md"
  if have_nvidia_gpu; then
    echo "check-cuda-trainer: a GPU is visible: run-all.sh's no-GPU answers are not checked here"
  elif [[ $rc == 0 ]] && grep -q '^| preflight | ok |.*mxrun' "$summary" && grep -q '^| build | ok |' "$summary" &&
       [[ $(grep -c "| skipped: no GPU here" "$summary") == 6 ]]; then
    ok "scripts/gpu/run-all.sh ran preflight and build with the bundle and skipped the 6 GPU steps (exit 0)"
  else
    bad "scripts/gpu/run-all.sh without a GPU: exit $rc"
    cat "$summary" "$work/run-all.log" 2>/dev/null | tail -30
  fi
else
  bad "scripts/gpu/bundle-mxrun.sh"
  tail -20 "$work/bundle.log"
fi

# 7. The mxrun module's in-process recovery through this PyTorch's _reconfigure (2.15; Gloo on the
#    CPU): the hidden [reconfigure] cases of the integration tests (a DDP job; and an FSDP2 job,
#    where mxrun says why it re-forms groups anew instead), with this environment's Python.
tests_bin="$build/bin/mxrun_integration_tests"
if MXRUN_TEST_RECONFIGURE_PYTHON="$venv_cuda/bin/python3" "$tests_bin" "[reconfigure]" \
     >"$work/reconfigure.log" 2>&1; then
  ok "mxrun.run recovered through torch.distributed._reconfigure ($(grep -m1 'All tests passed' "$work/reconfigure.log"))"
else
  bad "mxrun.run through torch.distributed._reconfigure: $tests_bin \"[reconfigure]\""
  tail -40 "$work/reconfigure.log"
fi


echo "check-cuda-trainer: $passed passed, $failed failed"
[[ $failed == 0 ]]
