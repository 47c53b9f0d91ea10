#!/usr/bin/env bash
# Builds mxrun's Debian packages, for cluster nodes that are managed with packages (issue 58):
#
#   scripts/build-deb.sh [--out=DIR]        (default DIR: dist/; MXRUN_BUILD_DIR as scripts/build.sh)
#
#   mxrun_<version>-1_amd64.deb      the programs (/usr/bin/mxrun, mxrun-multinode, mxrun-master),
#                                    the systemd units (/usr/lib/systemd/system), the example job
#                                    /etc/mxrun/example.toml (a conffile: dpkg keeps an edited one)
#   python3-mxrun_<version>-1_all.deb  the worker module for the system Python
#                                    (/usr/lib/python3/dist-packages: mxrun, its entry points for
#                                    Lightning, the auto-progress .pth), as Debian splits python3-*
#
# The files are those of a source install: scripts/install.sh stages them (DESTDIR), from the
# programs scripts/build.sh builds (RelWithDebInfo, then stripped here as dh_strip does). The
# bundled trainer is left out: it loads LibTorch from the project's venv by its path. Depends come
# from dpkg-shlibdeps (the Debian 12 libraries the programs load: gRPC 1.51, Protobuf 3.21,
# Abseil, hwloc, OpenSSL 3). Neither unit is enabled or started at install: the head node enables
# the master (systemctl enable --now mxrun-master), each job starts its agent
# (systemctl start mxrun-agent@JOB). Removal stops them; an upgrade leaves them running on the old
# programs until they are restarted (a restarted agent restarts its job's workers). Purge also
# removes the master's state and the units' enable links. scripts/check-deb.sh checks all of it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="$root/dist"
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-deb.sh: unknown argument '$arg' (accepted: --out=DIR)" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null ||
    { echo "build-deb.sh: $tool is missing: run scripts/install-deps.sh" >&2; exit 2; }
done
MXRUN_BUILD_TARGETS="mxrun mxrun-multinode mxrun-master man-pages" "$root/scripts/build.sh" >&2
upstream=$(sed -n 's/^project(mxrun VERSION \([0-9.]*\) .*/\1/p' "$root/CMakeLists.txt")
[[ -n "$upstream" ]] || { echo "build-deb.sh: no project(mxrun VERSION ...) in CMakeLists.txt" >&2; exit 1; }
version="$upstream-1"
# Whoever builds the package for their cluster names themselves (MXRUN_DEB_MAINTAINER).
maintainer="${MXRUN_DEB_MAINTAINER:-mxrun developers <mxrun@example.org>}"
# The changelog's date is the commit's, so that two builds of one commit give the same package.
date=$(git -C "$root" log -1 --format=%cD 2>/dev/null || date -R)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
work=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-build-deb.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
mkdir -p "$out"

# The docs Debian asks of every package: a copyright file, and its changelog, compressed.
write_docs() {  # package-root package-name
  local doc="$1/usr/share/doc/$2"
  install -d "$doc"
  cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: mxrun
Comment: The repository names no license yet: choosing one is for its owners. Until then no
 license is granted beyond what the owners grant to those they give this package.

Files: *
Copyright: 2026 the mxrun developers
License: none
 No license has been chosen for mxrun yet.
EOF
  printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
    "$2" "$version" "$commit" "$maintainer" "$date" | gzip -9n >"$doc/changelog.Debian.gz"
  chmod 0644 "$doc/copyright" "$doc/changelog.Debian.gz"
  # What lintian may not hold against these packages, each with its reason (scripts/check-deb.sh
  # fails on any other warning).
  install -d "$1/usr/share/lintian/overrides"
  cat >"$1/usr/share/lintian/overrides/$2" <<EOF
# Built for a cluster's own repository, not uploaded to Debian: there is no ITP bug to close.
$2: initial-upload-closes-no-bugs
EOF
  chmod 0644 "$1/usr/share/lintian/overrides/$2"
}

# The control file's fields common to both packages, then each one's own; md5sums; the .deb.
finish_package() {  # package-root package-name architecture
  local pkg="$1" name="$2" arch="$3"
  (cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
  chmod 0644 "$pkg/DEBIAN/md5sums"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
    cat "$work/$name.fields"
  } >"$pkg/DEBIAN/control"
  dpkg-deb --root-owner-group -Zxz --build "$pkg" "$out/${name}_${version}_${arch}.deb" >/dev/null
  echo "build-deb.sh: $out/${name}_${version}_${arch}.deb"
}

# --- mxrun: the programs, the units, the example job.
pkg="$work/mxrun"
DESTDIR="$pkg" "$root/scripts/install.sh" --prefix=/usr --sysconfdir=/etc >/dev/null
rm -f "$pkg/usr/bin/train"
for program in "$pkg"/usr/bin/*; do
  strip --remove-section=.comment --remove-section=.note "$program"
done
# Debian's manual pages are compressed, links included.
man1="$pkg/usr/share/man/man1"
gzip -9n "$man1/mxrun.1" "$man1/mxrun-master.1"
rm "$man1/mxrun-multinode.1"
ln -s mxrun.1.gz "$man1/mxrun-multinode.1.gz"
write_docs "$pkg" mxrun
install -d "$pkg/DEBIAN"
echo /etc/mxrun/example.toml >"$pkg/DEBIAN/conffiles"
for script in postinst prerm postrm; do
  install -m 0755 "$root/scripts/deb/mxrun.$script" "$pkg/DEBIAN/$script"
done
# dpkg-shlibdeps reads the package's name from a debian/control beside it.
mkdir -p "$work/shlibs/debian"
printf 'Source: mxrun\n\nPackage: mxrun\nArchitecture: amd64\n' >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O "$pkg"/usr/bin/* 2>"$work/shlibdeps.log" |
          sed -n 's/^shlibs:Depends=//p') ||
  { cat "$work/shlibdeps.log" >&2; echo "build-deb.sh: dpkg-shlibdeps failed" >&2; exit 1; }
cat >"$work/mxrun.fields" <<EOF
Depends: $depends
Recommends: python3-mxrun (= $version)
Section: admin
Priority: optional
Description: torchrun-compatible launcher for distributed PyTorch training
 mxrun runs one elastic agent per node: the agents rendezvous with a master
 over gRPC, get their ranks, start one worker per GPU with torchrun's worker
 environment, and restart the group on every node when a worker or a node
 fails. This package holds the launcher, the rendezvous master
 (mxrun-master) and their systemd units: mxrun-master.service for a head
 node and mxrun-agent@.service for one job's agent on each node, configured
 by /etc/mxrun/JOB.toml.
EOF
finish_package "$pkg" mxrun amd64

# --- python3-mxrun: the module, with the metadata that carries its entry points.
pkg="$work/python3-mxrun"
site="$pkg/usr/lib/python3/dist-packages"
install -d "$site/mxrun" "$site/mxrun-$upstream.dist-info"
install -m 0644 "$root"/python/mxrun/*.py "$site/mxrun/"
install -m 0644 "$root/python/mxrun-auto-progress.pth" "$site/"
install -m 0644 "$root/python/entry_points.txt" "$site/mxrun-$upstream.dist-info/entry_points.txt"
printf 'Metadata-Version: 2.1\nName: mxrun\nVersion: %s\nSummary: %s\n' "$upstream" \
  "mxrun's worker module: progress reports and in-process recovery" >"$site/mxrun-$upstream.dist-info/METADATA"
echo mxrun >"$site/mxrun-$upstream.dist-info/top_level.txt"
echo debian >"$site/mxrun-$upstream.dist-info/INSTALLER"
chmod 0644 "$site/mxrun-$upstream.dist-info"/*
write_docs "$pkg" python3-mxrun
install -d "$pkg/DEBIAN"
for script in postinst prerm; do
  install -m 0755 "$root/scripts/deb/python3-mxrun.$script" "$pkg/DEBIAN/$script"
done
cat >"$work/python3-mxrun.fields" <<EOF
Depends: python3:any (>= 3.8)
Recommends: mxrun (= $version)
Section: python
Priority: optional
Description: mxrun's worker module for Python 3 (progress, in-process recovery)
 The module that PyTorch scripts run by mxrun import (import mxrun) for
 progress reports and in-process recovery, and the interpreter start hook
 that reports the progress of scripts that never import it. Outside mxrun
 the hook does nothing.
EOF
finish_package "$pkg" python3-mxrun all
