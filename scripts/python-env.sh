#!/usr/bin/env bash
# The project's Python environments, and the one place that names their versions.
#
#   scripts/python-env.sh [cpu|cuda|wheel|docs]  make or update the environment, print its folder
#
#   cpu   .venv/       PyTorch 2.13 (CPU build): the Python, torchrun and PyTorch DDP that tests,
#                      benchmarks and the demo use, and what the trainer is built against.
#   cuda  .venv-cuda/  PyTorch 2.15, the current release (PyPI's CUDA 13 build, ~4 GB with its
#                      runtime wheels and NCCL): what scripts/gpu/build-trainer-cuda.sh builds the
#                      CUDA trainer against in CI, and what scripts/check-torch215.sh compares
#                      mxrun with (its TCPStore clients, its torchrun's environment and flags).
#   wheel .venv-wheel/ auditwheel: scripts/build-wheel.sh asks it for the wheel's platform tag;
#                      build: scripts/check-pip-install.sh makes the sdist with it; ziglang:
#                      the wheel's compilers.
#   docs  .venv-docs/  MkDocs and its Material theme: scripts/build-docs.sh builds the guide's site.
#
# Idempotent: an environment whose stamp lists exactly these requirements is left alone (no pip
# call). MXRUN_VENV / MXRUN_CUDA_VENV put them elsewhere; MXRUN_BASE_PYTHON picks the interpreter
# that makes them (default: Debian's /usr/bin/python3, 3.11, whose wheels lie on this disk).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Pinned: a bare `torch` on PyPI is a CUDA build of several GB, and every other name can drift.
CPU_REQUIREMENTS=(
  torch==2.13.0            # CPU build
  numpy==2.4.6             # torch's tensors <-> numpy (DDP reference, TensorBoard's reader)
  tensorboard==2.21.0      # scripts/check_tensorboard_events.py reads the trainer's event files
  python-etcd==0.4.5       # torchrun's etcd-v2 rendezvous backend (scripts/bench/etcd_ha.sh)
  lightning==2.6.6         # the frameworks' jobs run unchanged under mxrun (tests/python/frameworks,
  transformers==5.23.0     # tests/integration/frameworks_test.cc): their goodput from their own
  accelerate==1.15.0       # step counters
)
CUDA_REQUIREMENTS=(
  torch==2.15.0            # PyPI's build (CUDA 13); pulls its CUDA runtime wheels and nvidia-nccl-cu13
  numpy==2.4.6             # (torch warns at import without it)
)
DOCS_REQUIREMENTS=(
  mkdocs==1.6.1            # the guide as a site (mkdocs.yml, scripts/build-docs.sh)
  mkdocs-material==9.8.2   # its theme (end of life announced for 2027-05-05: its successor,
                           # Zensical, reads the same mkdocs.yml, and is at 0.1 on 2026-12-06)
  pymdown-extensions==12.3 # GitHub's anchors (toc's slugify), code blocks in lists (13 needs
                           # Python 3.11.5; Debian 12 has 3.11.2)
  matplotlib==3.11.2       # the pictures: the architecture, the recovery timeline, the benchmarks'
                           # plots (scripts/docs/pictures.py), SVG
  numpy==2.4.6             # matplotlib's arrays (the CUDA environment's pin)
)
WHEEL_REQUIREMENTS=(
  auditwheel==6.8.2        # `auditwheel show`: the manylinux tag the wheel's binaries allow
  pyelftools==0.33         # auditwheel's ELF reader
  packaging==26.4
  build==1.6.1             # `python -m build --sdist` (scripts/check-pip-install.sh)
  ziglang==0.17.1          # `zig cc -target x86_64-linux-gnu.2.28`: the wheel's programs and their
                           # libraries built against glibc 2.28 (scripts/wheel/build-glibc-deps.sh)
)

kind="${1:-cpu}"
case "$kind" in
  cpu) venv="${MXRUN_VENV:-$root/.venv}"; requirements=("${CPU_REQUIREMENTS[@]}") ;;
  cuda) venv="${MXRUN_CUDA_VENV:-$root/.venv-cuda}"; requirements=("${CUDA_REQUIREMENTS[@]}") ;;
  wheel) venv="${MXRUN_WHEEL_VENV:-$root/.venv-wheel}"; requirements=("${WHEEL_REQUIREMENTS[@]}") ;;
  docs) venv="${MXRUN_DOCS_VENV:-$root/.venv-docs}"; requirements=("${DOCS_REQUIREMENTS[@]}") ;;
  *) echo "python-env: unknown kind '$kind' (accepted: cpu, cuda, wheel, docs)" >&2; exit 2 ;;
esac
# One maker at a time per environment: scripts/test.sh checks the CUDA trainer and PyTorch 2.15
# side by side, and both ask for .venv-cuda.
exec {lock}>>"$venv.lock"
flock "$lock"
base_python="${MXRUN_BASE_PYTHON:-/usr/bin/python3}"
stamp="$venv/.mxrun-requirements"
wanted=$(printf '%s\n' "${requirements[@]}")

if [[ -x "$venv/bin/python3" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
  echo "$venv"
  exit 0
fi
[[ -x "$base_python" ]] || {
  echo "python-env: $base_python is missing (apt-get install python3 python3-venv, or set MXRUN_BASE_PYTHON)" >&2
  exit 2
}
if [[ ! -x "$venv/bin/python3" ]]; then
  "$base_python" -m venv "$venv" >&2 || {
    echo "python-env: '$base_python -m venv $venv' failed (apt-get install python3-venv)" >&2
    exit 2
  }
fi
echo "python-env: installing ${requirements[*]} into $venv (log: $venv/pip-install.log)" >&2
pip_env=()
if [[ "$kind" == cuda ]]; then
  # Some machines cap pip at an older torch in a machine-wide pip.conf (`constraint = ...`, seen
  # here: torch<=2.14.1). This environment exists to hold the current release, so it alone is made
  # without pip's configuration files; PIP_* variables still apply.
  pip_env=(PIP_CONFIG_FILE=/dev/null)
fi
# The CUDA environment serves one build and a few imports: byte-compiling all of PyTorch there
# took 14 of its 50 s (an import compiles what it uses).
compile=()
if [[ "$kind" == cuda ]]; then
  compile=(--no-compile)
fi
if ! env "${pip_env[@]}" "$venv/bin/python3" -m pip install --disable-pip-version-check "${compile[@]}" \
     "${requirements[@]}" \
     >"$venv/pip-install.log" 2>&1; then
  tail -20 "$venv/pip-install.log" >&2
  echo "python-env: pip install failed (the whole log: $venv/pip-install.log)" >&2
  exit 1
fi
printf '%s\n' "$wanted" >"$stamp"
echo "$venv"
