#!/usr/bin/env bash
# mxrun's wheel, tested as a user installs it (scripts/test.sh runs this in CI, issue 36):
#
#   scripts/check-wheel.sh
#
# 1. builds the wheel (scripts/build-wheel.sh) and installs it into a fresh virtual environment
#    that holds only PyTorch 2.13 (CPU) and the wheel, timing both installs;
# 2. hides, for the rest, every copy of the libraries the wheel vendors from this machine (a mount
#    namespace binds /dev/null over each: the build's -dev packages are out of sight), and checks
#    with ldd that the installed programs resolve nothing outside the environment but glibc and the
#    C++ runtime;
# 3. runs what a user runs from the environment alone (scripts/wheel/check-installed.sh, which
#    scripts/check-pip-install.sh runs on a source build too): a one-node PyTorch DDP job;
#    `python -m mxrun` with a script that reports progress through the installed `mxrun` module; a
#    two-node job on loopback through the installed mxrun-master with a token, and `mxrun status`
#    against it while it runs.
# Everything binds 127.0.0.1 on ports the kernel picks; every process is bounded by `timeout` and
# stopped by pid. Prints "check-wheel: N passed, N failed".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
check_name=check-wheel
# shellcheck source-path=SCRIPTDIR source=wheel/checks.sh
source "$root/scripts/wheel/checks.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-check-wheel.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# 1. Build and install.
if ! "$root/scripts/build-wheel.sh" "$work/dist" >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  echo "check-wheel: scripts/build-wheel.sh failed"
  exit 1
fi
wheel=$(ls "$work"/dist/mxrun-*.whl)
ok "$(tail -1 "$work/build.log")"
t0=$(date +%s%N)
fresh_torch_venv "$work/venv"
t1=$(date +%s%N)
"$work/venv/bin/python3" -m pip install -q --disable-pip-version-check "$wheel" >"$work/pip-wheel.log" 2>&1 ||
  { tail -20 "$work/pip-wheel.log"; echo "check-wheel: pip install of the wheel failed"; exit 1; }
t2=$(date +%s%N)
ok "installed into a fresh venv: $torch_pin in $(((t1 - t0) / 1000000)) ms, the wheel ($(du -h "$wheel" | cut -f1)) in $(((t2 - t1) / 1000000)) ms"

# 2 and 3 run in a mount namespace where this machine's copies of the vendored libraries are gone.
cat >"$work/inside.sh" <<'INSIDE'
set -uo pipefail
venv=$1 root=$2 work=$3
# Hidden: every vendored library but those Python and PyTorch themselves load from the system
# (zlib, OpenSSL, ...: base libraries every machine with Python has, not the build's).
needed=$(for f in "$(readlink -f "$venv/bin/python3")" /usr/lib/python3*/lib-dynload/*.so \
                  "$venv"/lib/python3*/site-packages/torch/lib/*.so* \
                  "$venv"/lib/python3*/site-packages/torch/_C*.so; do
           ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1}'
         done | sort -u)
kept=()
for lib in "$venv"/lib/mxrun/*; do
  name=$(basename "$lib")
  if grep -qxF "$name" <<<"$needed"; then kept+=("$name"); continue; fi
  for copy in /usr/lib/x86_64-linux-gnu/"$name" /usr/lib/"$name" /usr/local/lib/"$name"; do
    [[ -e "$copy" ]] && mount --bind /dev/null "$(readlink -f "$copy")"
  done
done
export PATH="$venv/bin:/usr/bin:/bin" PYTHONPATH= PYTHON_EXEC=
unset PYTHONPATH PYTHON_EXEC VIRTUAL_ENV
say() { echo "$1: $2"; }

# The hiding works: the build's own mxrun, which loads them from this machine, no longer starts.
if "$root/build/bin/mxrun" --version >/dev/null 2>&1; then
  say bad "the machine's copies of the vendored libraries are still loadable (build/bin/mxrun starts)"
else
  say ok "this machine's copies of $(( $(ls "$venv"/lib/mxrun | wc -l) - ${#kept[@]} )) of the $(ls "$venv"/lib/mxrun | wc -l) vendored libraries are hidden (build/bin/mxrun no longer starts); kept, since Python or PyTorch load them: ${kept[*]:-none}"
fi

# What the programs load.
for program in mxrun mxrun-multinode mxrun-master; do
  outside=$(ldd "$venv/bin/$program" | awk '$2 == "=>" {print $3} $2 ~ /not/ {print "missing:" $1}' |
            while read -r p; do readlink -f "$p" 2>/dev/null || echo "$p"; done |
            grep -vE "^$(readlink -f "$venv")/lib/mxrun/|/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so" || true)
  if [[ -z "$outside" ]]; then say ok "$program loads only the wheel's libraries, glibc and the C++ runtime"
  else say bad "$program loads from outside the wheel: $(echo $outside)"; fi
done

# What a user runs from the environment (scripts/wheel/check-installed.sh).
bash "$root/scripts/wheel/check-installed.sh" "$venv" "$root" "$work"
INSIDE
count_installed_checks < <(unshare --mount --propagation private bash "$work/inside.sh" "$work/venv" "$root" "$work" 2>&1)

report_checks
