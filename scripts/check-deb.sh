#!/usr/bin/env bash
# mxrun's Debian packages (scripts/build-deb.sh; issue 58), checked as an operator gets them
# (scripts/test.sh runs this in CI):
#
#   scripts/check-deb.sh
#
# 1. builds them, and reads them back: the files, the conffile, the dependencies dpkg-shlibdeps
#    found, no debug info, no trainer;
# 2. lintian, which must report no error and no warning (the tags that remain are overridden in
#    scripts/deb/lintian-overrides.*, each with its reason);
# 3. boots a container with systemd as its PID 1 (systemd-nspawn) over a throwaway overlay of this
#    machine's own files, with no network but loopback, and there
#    (scripts/deb/check-installed.sh) `dpkg -i`, `systemctl start mxrun-master`, one job through
#    `systemctl start mxrun-agent@check` with the packaged module in the system Python,
#    `dpkg -r` and `dpkg --purge`, then compares the files with those before the install.
# This machine's own files are never touched: the overlay's writes go to a tmpfs in a mount
# namespace of this script's own. Prints "check-deb: N passed, N failed".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
check_name=check-deb
# shellcheck source-path=SCRIPTDIR source=wheel/checks.sh
source "$root/scripts/wheel/checks.sh"
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

"$root/scripts/install-deps.sh" >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-check-deb.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
mkdir -p "$work/check/debs"

# 1. Built, and read back.
t0=$(date +%s%N)
if ! "$root/scripts/build-deb.sh" --out="$work/check/debs" >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  echo "check-deb: scripts/build-deb.sh failed (the log's end above)"
  exit 1
fi
deb=$(echo "$work"/check/debs/mxrun_*_amd64.deb)
pydeb=$(echo "$work"/check/debs/python3-mxrun_*_all.deb)
ok "built $(basename "$deb") ($(du -h "$deb" | cut -f1)) and $(basename "$pydeb") ($(du -h "$pydeb" | cut -f1)) in $(ms_since "$t0") ms"
files=$(dpkg-deb -c "$deb" | awk '{print $6}')
for path in ./usr/bin/mxrun ./usr/bin/mxrun-multinode ./usr/bin/mxrun-master \
            ./usr/lib/systemd/system/mxrun-master.service ./usr/lib/systemd/system/mxrun-agent@.service \
            ./etc/mxrun/example.toml ./usr/share/doc/mxrun/copyright \
            ./usr/share/man/man1/mxrun.1.gz ./usr/share/man/man1/mxrun-master.1.gz \
            ./usr/share/man/man1/mxrun-multinode.1.gz; do
  if grep -qxF "$path" <<<"$files"; then ok "mxrun's package holds $path"; else bad "mxrun's package lacks $path"; fi
done
if grep -q '/train$' <<<"$files"; then bad "mxrun's package holds the trainer"; else ok "mxrun's package leaves the trainer out"; fi
if [[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)" == /etc/mxrun/example.toml ]]; then
  ok "/etc/mxrun/example.toml is a conffile"
else
  bad "conffiles: $(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles 2>&1)"
fi
depends=$(dpkg-deb -f "$deb" Depends)
if [[ "$depends" == *libgrpc++1.51* && "$depends" == *libprotobuf32* && "$depends" == *libc6* ]]; then
  ok "Depends names the libraries the programs load: $depends"
else
  bad "Depends misses gRPC, Protobuf or libc: '$depends'"
fi
dpkg-deb -x "$deb" "$work/unpacked"
if readelf -S "$work/unpacked/usr/bin/mxrun" | grep -q '\.debug_info'; then
  bad "the packaged mxrun carries debug info"
else
  ok "the packaged programs are stripped (mxrun $(du -h "$work/unpacked/usr/bin/mxrun" | cut -f1))"
fi
pyfiles=$(dpkg-deb -c "$pydeb" | awk '{print $6}')
for path in ./usr/lib/python3/dist-packages/mxrun/__init__.py ./usr/lib/python3/dist-packages/mxrun-auto-progress.pth \
            "./usr/lib/python3/dist-packages/mxrun-$(dpkg-deb -f "$pydeb" Version | cut -d- -f1).dist-info/entry_points.txt"; do
  if grep -qxF "$path" <<<"$pyfiles"; then ok "python3-mxrun holds $path"; else bad "python3-mxrun lacks $path"; fi
done

# 2. lintian: no error, no warning.
t0=$(date +%s%N)
if lintian --fail-on error,warning --info "$deb" "$pydeb" >"$work/lintian.log" 2>&1; then
  ok "lintian reports no error and no warning on either package ($(ms_since "$t0") ms)"
else
  bad "lintian: $(grep -E '^[EWIP]: ' "$work/lintian.log" | tr '\n' ' ' || cat "$work/lintian.log")"
fi

# 3. Installed, used and removed under a real systemd, in a container over a throwaway overlay.
inside_unit='[Unit]
Description=mxrun Debian package check (scripts/check-deb.sh)
After=basic.target
[Service]
Type=oneshot
ExecStart=/check/check-installed.sh'
cp "$root/scripts/deb/check-installed.sh" "$work/check/"
# In a mount namespace of its own: a tmpfs holds the overlay's upper layer, so that nothing the
# container writes reaches this machine's files, and all of it goes when the namespace ends.
t0=$(date +%s%N)
set +e
unshare --mount --propagation private bash -euo pipefail -c '
  layers=$1/layers
  mkdir -p "$layers"
  # systemd-nspawn keeps its propagation folders in /run/systemd/nspawn, which it can remove only
  # from a tmpfs: this machine has /run on its disk.
  mount -t tmpfs mxrun-check-deb-run /run
  mount -t tmpfs mxrun-check-deb "$layers"
  mkdir -p "$layers/upper" "$layers/work" "$layers/root"
  mount -t overlay mxrun-check-deb -o "lowerdir=/,upperdir=$layers/upper,workdir=$layers/work" "$layers/root"
  units="$layers/root/etc/systemd/system"
  # This machine image forbids starting services from maintainer scripts (a policy-rc.d that
  # answers 101, as container images do); a cluster node has none.
  rm -f "$layers/root/usr/sbin/policy-rc.d"
  printf "%s\n" "$2" >"$units/mxrun-check.service"
  printf "[Unit]\nDescription=mxrun Debian package check\nRequires=basic.target mxrun-check.service\nAfter=basic.target\n" \
    >"$units/mxrun-check.target"
  # systemd-nspawn: its own PID namespace with systemd as PID 1, booted to the check alone (no
  # service this machine enables), and only loopback to listen on. This machine has no systemd
  # to register the container with or to make it a scope: it stays in the cgroup of this script.
  exec timeout --kill-after=10 240 systemd-nspawn --quiet --register=no --keep-unit --private-network \
    --bind="$1/check:/check" -D "$layers/root" \
    --boot -- systemd.unit=mxrun-check.target
' check-deb "$work" "$inside_unit" >"$work/nspawn.log" 2>&1 </dev/null
rc=$?
set -e
if [[ -f "$work/check/result" ]] && grep -q '^check-installed: done$' "$work/check/result"; then
  ok "the container with systemd booted, ran the check and powered off in $(ms_since "$t0") ms (nspawn exit $rc)"
else
  bad "the container's check did not finish (systemd-nspawn exit $rc); its console:"
  tail -40 "$work/nspawn.log"
  [[ -f "$work/check/result" ]] && cat "$work/check/result"
fi
if [[ -f "$work/check/result" ]]; then
  count_installed_checks <"$work/check/result"
  grep -vE '^(ok|bad): |^check-installed: done$' "$work/check/result" || true
fi
report_checks
