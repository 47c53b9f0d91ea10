#!/usr/bin/env bash
# Builds only the bundled trainer against the CUDA LibTorch inside a PyTorch installation, with
# NCCL: for GPU machines that have PyTorch but neither gRPC nor Debian's packages.
#
#   scripts/gpu/build-trainer-cuda.sh [BUILD_DIR]        (default: build-cuda)
#
# Environment:
#   PYTHON        the Python whose torch to build against (default: python3)
#   CUDA_ARCH     CUDA architectures (default: 90, H100/H200; "native" needs a visible GPU)
#   HEADERS_DIR   folder with CLI/CLI.hpp, nlohmann/json.hpp, gloo/ (Gloo's headers, which the torch
#                 wheel lacks and its ProcessGroupGloo.hpp includes: docs/ARCHITECTURE.md says why
#                 Debian's are safe) and, for the tests, catch2/catch.hpp
#                 (default: .deps/include, filled from /usr/include when those headers are
#                 installed there; on a machine without them, run
#                 `scripts/gpu/build-trainer-cuda.sh --vendor-headers` on a Debian machine with the
#                 project's dependencies first and carry .deps/ over). Without Catch2 only `train`
#                 is built.
#
# The result is BUILD_DIR/bin/train and the GPU tests, run by `ctest --test-dir BUILD_DIR -L gpu`
# (their launcher is this PyTorch's torchrun). mxrun itself is built by scripts/build.sh on
# Debian; the trainer runs under any launcher (mxrun, torchrun --no_python) or alone.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
headers="${HEADERS_DIR:-$root/.deps/include}"

vendor_headers() {
    mkdir -p "$headers"
    for dir in CLI nlohmann gloo; do
        if [[ ! -d "$headers/$dir" ]]; then
            [[ -d "/usr/include/$dir" ]] || {
                echo "build-trainer-cuda: /usr/include/$dir is missing (apt-get install libcli11-dev nlohmann-json3-dev libgloo-dev)" >&2
                exit 2
            }
            cp -r "/usr/include/$dir" "$headers/"
        fi
    done
    # Catch2 (v2, one header) only for the tests.
    if [[ ! -f "$headers/catch2/catch.hpp" ]]; then
        if [[ -f /usr/include/catch2/catch.hpp ]]; then
            mkdir -p "$headers/catch2"
            cp /usr/include/catch2/catch.hpp "$headers/catch2/"
        else
            echo "build-trainer-cuda: no catch2/catch.hpp (apt-get install catch2): building train without its tests" >&2
        fi
    fi
}

if [[ "${1:-}" == "--vendor-headers" ]]; then
    vendor_headers
    echo "build-trainer-cuda: headers in $headers"
    exit 0
fi
build="${1:-$root/build-cuda}"
python="${PYTHON:-python3}"
arch="${CUDA_ARCH:-90}"
# PyTorch's CMake wants the same architectures as TORCH_CUDA_ARCH_LIST ("90;80" -> "9.0;8.0").
torch_arch_list=""
if [[ "$arch" != native ]]; then
    torch_arch_list=$(echo "$arch" | sed -E 's/([0-9]+)([0-9])/\1.\2/g')
fi

if [[ ! -f "$headers/CLI/CLI.hpp" || ! -f "$headers/nlohmann/json.hpp" || ! -f "$headers/gloo/algorithm.h" ]]; then
    vendor_headers
fi
prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || {
    echo "build-trainer-cuda: $python cannot import torch (set PYTHON to a Python with PyTorch)" >&2
    exit 2
}
# NCCL's header ships in the nvidia-nccl wheel beside PyTorch, or with the CUDA toolkit.
nccl_include=$("$python" - <<'PY' 2>/dev/null || true
import os
try:
    import nvidia.nccl
    paths = list(getattr(nvidia.nccl, "__path__", [])) or [os.path.dirname(nvidia.nccl.__file__)]
    for p in paths:
        if os.path.exists(os.path.join(p, "include", "nccl.h")):
            print(os.path.join(p, "include"))
            break
except Exception:
    pass
PY
)
for candidate in "$nccl_include" /usr/local/cuda/include /usr/include; do
    if [[ -n "$candidate" && -f "$candidate/nccl.h" ]]; then nccl_include=$candidate; break; fi
done
[[ -f "$nccl_include/nccl.h" ]] || { echo "build-trainer-cuda: nccl.h not found" >&2; exit 2; }

# The CUDA toolkit: $CUDA_HOME, else /usr/local/cuda, else the folder above nvcc on PATH. Named
# explicitly, since PyTorch's CMake derives it from nvcc's folder, which a wrapper script in
# /usr/local/bin (as on this project's machines) would make /usr/local.
cuda_home="${CUDA_HOME:-}"
if [[ -z "$cuda_home" ]]; then
    if [[ -x /usr/local/cuda/bin/nvcc ]]; then
        cuda_home=/usr/local/cuda
    elif command -v nvcc >/dev/null 2>&1; then
        cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    fi
fi
[[ -n "$cuda_home" && -x "$cuda_home/bin/nvcc" ]] || {
    echo "build-trainer-cuda: no CUDA toolkit (nvcc) found: install it, or set CUDA_HOME" >&2
    exit 2
}

# NVRTC, which PyTorch's CMake links: the toolkit's, else the one in PyTorch's CUDA wheels (a
# minimal toolkit, as on this project's machines, may lack it).
nvrtc=$(ls "$cuda_home"/lib64/libnvrtc.so* "$cuda_home"/lib/libnvrtc.so* 2>/dev/null | head -1 || true)
if [[ -z "$nvrtc" ]]; then
    nvrtc=$("$python" - <<'PY' 2>/dev/null || true
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
found = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnvrtc.so*")))
print(next((f for f in found if "builtins" not in f and ".alt." not in f), ""))
PY
)
fi

# The CUDA libraries' headers (cuSPARSE, cuBLAS, ...) that LibTorch's CUDA headers include: from
# PyTorch's CUDA wheels, searched after the toolkit's own (-idirafter), which a minimal toolkit
# may lack.
extra_includes=$("$python" - <<'PY' 2>/dev/null || true
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(" ".join("-idirafter " + d for d in sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))))
PY
)

# Debian's CMake 3.25 where there is one: a pip-installed CMake 4 may come first on PATH (and is
# what a GPU machine has: the policy floor lets it read config files written for older CMake).
cmake="${CMAKE:-$(command -v /usr/bin/cmake || command -v cmake)}"
export CMAKE_POLICY_VERSION_MINIMUM="${CMAKE_POLICY_VERSION_MINIMUM:-3.5}"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
"$cmake" -S "$root" -B "$build" "${generator[@]}" \
    -DMXRUN_TRAINER_ONLY=ON \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DMXRUN_HEADERS_DIR="$headers" \
    -DMXRUN_TEST_PYTHON="$(command -v "$python")" \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCUDA_TOOLKIT_ROOT_DIR="$cuda_home" \
    -DCMAKE_CUDA_COMPILER="$cuda_home/bin/nvcc" \
    ${nvrtc:+-DCUDA_nvrtc_LIBRARY="$nvrtc"} \
    ${torch_arch_list:+-DTORCH_CUDA_ARCH_LIST="$torch_arch_list"} \
    -DCMAKE_CXX_FLAGS="-I$nccl_include $extra_includes -idirafter $headers"
if [[ -f "$headers/catch2/catch.hpp" ]]; then
    "$cmake" --build "$build" --parallel "$(nproc)"
    echo "build-trainer-cuda: built $build/bin/train and its tests: ctest --test-dir $build (-L gpu: GPU only)"
else
    "$cmake" --build "$build" --parallel "$(nproc)" --target train
    echo "build-trainer-cuda: built $build/bin/train (no tests: no catch2/catch.hpp in $headers)"
fi
