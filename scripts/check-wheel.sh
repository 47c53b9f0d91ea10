#!/usr/bin/env bash
# mxrun's wheel, tested as a user installs it (scripts/test.sh runs this in CI, issue 36):
#
#   scripts/check-wheel.sh
#
# 1. builds the wheel (scripts/build-wheel.sh) and installs it into a fresh virtual environment
#    that holds only PyTorch 2.13 (CPU) and the wheel, timing both installs;
# 2. hides, for the rest, this machine's copies of every library its own build of mxrun loads
#    (a mount namespace binds /dev/null over each: the build's -dev packages are out of sight),
#    and checks with ldd that the installed programs, linked statically, load glibc alone;
# 3. runs what a user runs from the environment alone (scripts/wheel/check-installed.sh, which
#    scripts/check-pip-install.sh runs on a source build too): a one-node PyTorch DDP job;
#    `python -m mxrun` with a script that reports progress through the installed `mxrun` module; a
#    two-node job on loopback through the installed mxrun-master with a token, and `mxrun status`
#    against it while it runs; then every command of the getting-started page as written
#    (scripts/docs/run-getting-started.py: the page's output checked, numbers aside);
# 4. does it again on an older Linux, Debian 11 (glibc 2.31, Python 3.9, pip 20.3; made once by
#    scripts/wheel/older-distro-root.sh), in a chroot over a throwaway overlay of it: Debian 11's
#    own pip installs the wheel (its manylinux_2_28 tag is among those it accepts) into a venv of
#    Debian 11's Python, the programs load Debian 11's glibc and nothing else, and the jobs of
#    check-installed.sh that need no PyTorch run from there.
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

# Certificates for check-installed.sh's mutual-TLS job (MXRUN_CHECK_CERTS).
certs="$work/certs"
{ "$root/scripts/make-certs.sh" "$certs" ca && "$root/scripts/make-certs.sh" "$certs" node node 127.0.0.1; } \
  >"$work/certs.log" 2>&1 || { cat "$work/certs.log"; echo "check-wheel: scripts/make-certs.sh failed"; exit 1; }
export MXRUN_CHECK_CERTS="$certs"

# 2 and 3 run in a mount namespace where this machine's copies of the build's libraries are gone.
cat >"$work/inside.sh" <<'INSIDE'
set -uo pipefail
venv=$1 root=$2 work=$3
# Hidden: what the machine's own build of mxrun-multinode (scripts/build.sh, linked against
# Debian's gRPC, Protobuf, Abseil, ...) loads, but glibc, the C++ runtime and what Python and
# PyTorch themselves load from the system (zlib, OpenSSL, ...: base libraries every machine with
# Python has, not the build's).
needed=$(for f in "$(readlink -f "$venv/bin/python3")" /usr/lib/python3*/lib-dynload/*.so \
                  "$venv"/lib/python3*/site-packages/torch/lib/*.so* \
                  "$venv"/lib/python3*/site-packages/torch/_C*.so; do
           ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1}'
         done | sort -u)
hidden=0
kept=()
while read -r name path; do
  case "$name" in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) continue ;; esac
  if grep -qxF "$name" <<<"$needed"; then kept+=("$name"); continue; fi
  mount --bind /dev/null "$(readlink -f "$path")" && hidden=$((hidden + 1))
done < <(ldd "$root/build/bin/mxrun-multinode" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
export PATH="$venv/bin:/usr/bin:/bin" PYTHONPATH= PYTHON_EXEC=
unset PYTHONPATH PYTHON_EXEC VIRTUAL_ENV
say() { echo "$1: $2"; }

# The hiding works: the build's own mxrun-multinode, which loads them from this machine, no longer starts.
if "$root/build/bin/mxrun-multinode" --version >/dev/null 2>&1; then
  say bad "the machine's copies of the build's libraries are still loadable (build/bin/mxrun-multinode starts)"
else
  say ok "this machine's copies of the $hidden libraries its own build loads are hidden (build/bin/mxrun-multinode no longer starts); kept, since Python or PyTorch load them: ${kept[*]:-none}"
fi

# What the programs load: glibc alone (libpthread, libdl and librt are apart in glibc 2.28).
for program in mxrun mxrun-multinode mxrun-master; do
  outside=$(ldd "$venv/bin/$program" | awk '$2 == "=>" {print $3} $2 ~ /not/ {print "missing:" $1}' |
            while read -r p; do readlink -f "$p" 2>/dev/null || echo "$p"; done |
            grep -vE "/(libc|libm|libdl|libpthread|librt)\.so" || true)
  if [[ -z "$outside" ]]; then say ok "$program loads glibc alone"
  else say bad "$program loads more than glibc: $(echo $outside)"; fi
done

# What a user runs from the environment (scripts/wheel/check-installed.sh).
bash "$root/scripts/wheel/check-installed.sh" "$venv" "$root" "$work"
# The getting-started page, run as its reader runs it, with this environment activated.
"$venv/bin/python3" "$root/scripts/docs/run-getting-started.py" "$root/docs/guide/getting-started.md" \
  "$venv" "$work/dist" 2>&1
INSIDE
count_installed_checks < <(unshare --mount --propagation private bash "$work/inside.sh" "$work/venv" "$root" "$work" 2>&1)

# 4. Debian 11, in a chroot: its root read-only below a tmpfs in a private mount namespace, the
# checkout bound read-only at its own path (check-installed.sh and the workers it runs).
if ! older=$("$root/scripts/wheel/older-distro-root.sh" 2>"$work/older-root.log"); then
  bad "no Debian 11 root to run the wheel in: $(tail -3 "$work/older-root.log")"
else
  cat >"$work/older.sh" <<'OLDER'
set -euo pipefail
older=$1 root=$2 work=$3 wheel=$4
trap 'echo "bad: setting up the Debian 11 chroot failed (line $LINENO of its script)"' ERR
top="$work/older-top"
mkdir -p "$top"
mount -t tmpfs tmpfs "$top"
mkdir -p "$top/upper" "$top/work" "$top/root"
mount -t overlay overlay -o "lowerdir=$older,upperdir=$top/upper,workdir=$top/work" "$top/root"
chroot_root="$top/root"
mount -t proc proc "$chroot_root/proc"
mount --rbind /dev "$chroot_root/dev"
mount --rbind /sys "$chroot_root/sys"
mount -t tmpfs tmpfs "$chroot_root/tmp"
# What an installed system has and debootstrap's minbase does not: localhost in /etc/hosts.
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$chroot_root/etc/hosts"
mkdir -p "$chroot_root$root"
mount --bind "$root" "$chroot_root$root"
mount -o remount,bind,ro "$chroot_root$root"
cp "$wheel" "$chroot_root/tmp/"
cp -r "$MXRUN_CHECK_CERTS" "$chroot_root/tmp/certs"
cat >"$chroot_root/tmp/run.sh" <<'RUN'
set -uo pipefail
root=$1 wheel=$2
say() { echo "$1: $2"; }
glibc=$(ldd --version | head -1)
python3 -m venv /tmp/venv
pip=$(/tmp/venv/bin/pip --version | cut -d' ' -f1-2)
if out=$(/tmp/venv/bin/pip install --no-index --disable-pip-version-check "$wheel" 2>&1); then
  say ok "Debian 11 ($glibc, $(python3 --version)): its $pip installs $(basename "$wheel")"
else
  say bad "Debian 11's $pip refuses the wheel: $(echo "$out" | tail -3)"
  exit 0
fi
for program in mxrun mxrun-multinode mxrun-master; do
  loaded=$(ldd "/tmp/venv/bin/$program" 2>&1 | awk '$2 == "=>" {print $3} $2 ~ /not/ {print "missing:" $1}')
  others=$(echo "$loaded" | grep -vE '^/lib/x86_64-linux-gnu/lib(c|m|pthread|dl|rt)\.so\.[0-9]+$' || true)
  if [[ -z "$others" ]] && /tmp/venv/bin/$program --version >/dev/null 2>&1; then
    say ok "$program runs on Debian 11, loading its glibc alone ($(echo $loaded | xargs -n1 basename | tr '
' ' '))"
  else
    say bad "$program on Debian 11: loads $(echo $others); --version: $(/tmp/venv/bin/$program --version 2>&1 | head -2)"
  fi
done
mkdir -p /tmp/work
bash "$root/scripts/wheel/check-installed.sh" /tmp/venv "$root" /tmp/work --without-torch
RUN
chroot "$chroot_root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 MXRUN_CHECK_CERTS=/tmp/certs \
  /bin/bash /tmp/run.sh "$root" "/tmp/$(basename "$wheel")"
OLDER
  count_installed_checks < <(unshare --mount --propagation private bash "$work/older.sh" "$older" "$root" "$work" "$wheel" 2>&1)
fi

report_checks
