#!/usr/bin/env bash
# The main job on this machine: installs dependencies, builds, and runs mxrun launching the
# bundled trainer (ResNet-18 on CIFAR-10-shaped data) with 2 workers.
#
# Without a GPU it trains a narrow ResNet-18 (--width 16) on 5,000 synthetic images for 3 epochs
# (a couple of minutes on 2 cores; accuracy climbs from chance to over 90%). With a GPU it runs the
# full-width model. Real CIFAR-10: pass --data_dir /path/to/cifar-10-batches-bin. Any trainer
# flag can be added and overrides the demo's choice (the last value of a flag wins), e.g.
#   scripts/demo.sh --epochs 10 --width 64
# Checkpoints and the metrics file go to $MXRUN_DEMO_DIR (default /tmp/mxrun-demo).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$root/scripts/install-deps.sh" --demo
# Only what the demo runs: the launcher and the trainer, not the test suite.
MXRUN_BUILD_TARGETS="mxrun train" "$root/scripts/build.sh"
bin="$build/bin"
export PYTHON_EXEC="${PYTHON_EXEC:-$venv/bin/python3}"  # the project's Python, with PyTorch 2.13
if [[ ! -x "$bin/train" ]]; then
    echo "demo: the bundled trainer was not built (LibTorch missing?); running the PyTorch DDP example" >&2
    exec "$bin/mxrun" --standalone --nproc_per_node=2 "$root/scripts/examples/ddp_allreduce.py" "$@"
fi
out="${MXRUN_DEMO_DIR:-/tmp/mxrun-demo}"
mkdir -p "$out"
if have_nvidia_gpu; then
    size=(--epochs 5 --batch_size 128)
    nproc=gpu
else
    size=(--width 16 --synthetic_train 5000 --synthetic_test 1000 --epochs 3 --batch_size 32
          --lr 0.05 --log_every 20)
    nproc=2
fi
echo "demo: mxrun --standalone --nproc_per_node=$nproc train ${size[*]} $* (metrics: $out/metrics.jsonl)" >&2
exec "$bin/mxrun" --standalone --nproc_per_node="$nproc" train "${size[@]}" \
    --ckpt_dir "$out/checkpoints" --metrics_file "$out/metrics.jsonl" "$@"
