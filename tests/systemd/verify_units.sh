#!/usr/bin/env bash
# The systemd units as scripts/install.sh installs them pass `systemd-analyze verify` with no
# warnings, point at the installed binaries, and the example job configuration parses.
#   verify_units.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

MXRUN_BUILD_DIR="$build" "$root/scripts/install.sh" --prefix="$tmp/usr" --sysconfdir="$tmp/etc" >/dev/null
units="$tmp/usr/lib/systemd/system"
cp "$units/mxrun-agent@.service" "$tmp/mxrun-agent@example.service"  # an instance of the template
out=$(systemd-analyze verify "$units/mxrun-master.service" "$tmp/mxrun-agent@example.service" 2>&1) || {
    echo "systemd-analyze verify failed:"; echo "$out"; exit 1; }
if [[ -n "$out" ]]; then
    echo "systemd-analyze verify warned:"; echo "$out"; exit 1
fi
grep -q "^ExecStart=$tmp/usr/bin/mxrun --config $tmp/etc/mxrun/%i.toml\$" "$units/mxrun-agent@.service"
grep -q "^ExecStart=$tmp/usr/bin/mxrun-master \$MXRUN_MASTER_STATE " "$units/mxrun-master.service"
grep -q '^Environment="MXRUN_MASTER_STATE=--state_dir /var/lib/mxrun-master"' "$units/mxrun-master.service"
grep -q '^Type=notify$' "$units/mxrun-agent@.service"

# The manual pages, the launcher's other build linked to the launcher's page.
[[ -f "$tmp/usr/share/man/man1/mxrun.1" && -f "$tmp/usr/share/man/man1/mxrun-master.1" ]]
[[ "$(readlink "$tmp/usr/share/man/man1/mxrun-multinode.1")" == mxrun.1 ]]

# The example configuration is valid, and names the bundled trainer.
"$tmp/usr/bin/mxrun" --config "$tmp/etc/mxrun/example.toml" --print-config | grep -q '^entrypoint = "train"'

# DESTDIR staging: files under DESTDIR, paths inside the units without it; an existing
# configuration is never overwritten.
mkdir -p "$tmp/stage/etc/mxrun"
echo "# mine" > "$tmp/stage/etc/mxrun/example.toml"
DESTDIR="$tmp/stage" MXRUN_BUILD_DIR="$build" "$root/scripts/install.sh" --prefix=/usr >/dev/null
grep -q '^ExecStart=/usr/bin/mxrun-master \$MXRUN_MASTER_STATE ' "$tmp/stage/usr/lib/systemd/system/mxrun-master.service"
[[ -x "$tmp/stage/usr/bin/mxrun" ]]
[[ "$(cat "$tmp/stage/etc/mxrun/example.toml")" == "# mine" ]]

# Bad arguments are refused with exit code 2.
set +e
"$root/scripts/install.sh" --prefix=relative >/dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]]
echo "units verified"
