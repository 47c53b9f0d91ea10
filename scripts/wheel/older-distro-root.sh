#!/usr/bin/env bash
# An older Linux for the wheel to run on: Debian 11 (glibc 2.31, GCC 10's libstdc++, Python 3.9,
# pip 20.3), the oldest release Debian's mirror still serves, made once with debootstrap (minbase,
# with python3-venv) and cached. scripts/check-wheel.sh installs the wheel there with that pip and
# runs jobs from it inside a chroot: nothing of this machine's (glibc 2.36, Debian 12's libraries)
# is in sight.
#
#   scripts/wheel/older-distro-root.sh        prints the root folder
#
# Cached under $MXRUN_DISTRO_CACHE (default ~/.cache/mxrun/distro); made in about a minute and a
# half (~270 MB), from deb.debian.org.
set -euo pipefail
suite=bullseye
packages=python3,python3-venv,python3-pip
cache="${MXRUN_DISTRO_CACHE:-$HOME/.cache/mxrun/distro}"
key=$(echo "$suite $packages" | sha256sum | cut -c1-12)
rootfs="$cache/debian-$suite-$key"
if [[ -f "$rootfs/.mxrun-complete" ]]; then
  echo "$rootfs"
  exit 0
fi
command -v debootstrap >/dev/null ||
  { echo "older-distro-root: debootstrap is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
mkdir -p "$cache"
exec {lock}>>"$cache/.lock"
flock "$lock"
if [[ -f "$rootfs/.mxrun-complete" ]]; then echo "$rootfs"; exit 0; fi
rm -rf -- "$rootfs"
echo "older-distro-root: debootstrap $suite ($packages) into $rootfs" >&2
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" \
     http://deb.debian.org/debian >"$cache/debootstrap-$suite.log" 2>&1; then
  tail -20 "$cache/debootstrap-$suite.log" >&2
  echo "older-distro-root: debootstrap of Debian $suite failed (log: $cache/debootstrap-$suite.log)" >&2
  rm -rf -- "$rootfs"
  exit 1
fi
touch "$rootfs/.mxrun-complete"
echo "$rootfs"
