#!/usr/bin/env bash
# Installs mxrun (built by scripts/build.sh) with its systemd units and an example job.
#
#   scripts/install.sh [--prefix=/usr/local] [--sysconfdir=/etc] [--build-dir=build]
#   DESTDIR=/tmp/pkg scripts/install.sh --prefix=/usr      # staged, for packaging
#
# Installs:
#   PREFIX/bin/{mxrun,mxrun-multinode,mxrun-master,train}   (train when it was built)
#   PREFIX/lib/systemd/system/{mxrun-master.service,mxrun-agent@.service}
#       (unit paths point at PREFIX/bin; /usr/local/lib/systemd/system is on systemd's path)
#   SYSCONFDIR/mxrun/example.toml                            (never overwrites an existing one)
#   PREFIX/share/man/man1/{mxrun.1,mxrun-master.1}          (mxrun-multinode.1 links to mxrun.1)
# Then: systemctl daemon-reload; systemctl enable --now mxrun-master (head node), and per job
# write /etc/mxrun/JOB.toml and systemctl start mxrun-agent@JOB.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
prefix=/usr/local
sysconfdir=/etc
for arg in "$@"; do
    case "$arg" in
        --prefix=*) prefix="${arg#*=}" ;;
        --sysconfdir=*) sysconfdir="${arg#*=}" ;;
        --build-dir=*) build="${arg#*=}" ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument '$arg' (accepted: --prefix=DIR --sysconfdir=DIR --build-dir=DIR)" >&2; exit 2 ;;
    esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be an absolute path, not '$prefix'" >&2; exit 2 ;; esac
case "$sysconfdir" in /*) ;; *) echo "install.sh: --sysconfdir must be an absolute path, not '$sysconfdir'" >&2; exit 2 ;; esac
destdir="${DESTDIR:-}"
bin="$build/bin"
for program in mxrun mxrun-multinode mxrun-master; do
    [[ -x "$bin/$program" ]] || { echo "install.sh: $bin/$program is missing: run scripts/build.sh first" >&2; exit 2; }
done

[[ -f "$build/man/mxrun.1" && -f "$build/man/mxrun-master.1" ]] ||
  { echo "install.sh: $build/man/ lacks the manual pages: run scripts/build.sh first" >&2; exit 2; }

install -d "$destdir$prefix/bin" "$destdir$prefix/lib/systemd/system" "$destdir$sysconfdir/mxrun" \
  "$destdir$prefix/share/man/man1"
for program in mxrun mxrun-multinode mxrun-master train; do
    [[ -x "$bin/$program" ]] && install -m 0755 "$bin/$program" "$destdir$prefix/bin/$program"
done
for unit in mxrun-master.service mxrun-agent@.service; do
    sed -e "s|@BINDIR@|$prefix/bin|g" -e "s|/etc/mxrun/|$sysconfdir/mxrun/|g" \
        "$root/scripts/systemd/$unit" > "$destdir$prefix/lib/systemd/system/$unit"
    chmod 0644 "$destdir$prefix/lib/systemd/system/$unit"
done
install -m 0644 "$build/man/mxrun.1" "$build/man/mxrun-master.1" "$destdir$prefix/share/man/man1/"
ln -sf mxrun.1 "$destdir$prefix/share/man/man1/mxrun-multinode.1"
if [[ ! -e "$destdir$sysconfdir/mxrun/example.toml" ]]; then
    install -m 0644 "$root/scripts/systemd/example.toml" "$destdir$sysconfdir/mxrun/example.toml"
fi
echo "install.sh: installed into ${destdir}${prefix} (units in $prefix/lib/systemd/system, config in $sysconfdir/mxrun)"
