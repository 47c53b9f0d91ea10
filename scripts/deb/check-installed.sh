#!/usr/bin/env bash
# Runs inside the container that scripts/check-deb.sh boots (systemd as its PID 1, a throwaway
# overlay of the host's files, no network but loopback), as the unit that scripts/check-deb.sh
# adds: installs the two packages from /check/debs, uses them as an operator would, removes and
# purges them, and says "ok: ..." or "bad: ..." for each check into /check/result. Then it powers
# the container off.
#   check-installed.sh
set -u
exec >/check/result 2>&1
ok() { echo "ok: $*"; }
bad() { echo "bad: $*"; }
check() {  # description command...
  local what="$1"
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
# Every file where a package may put one, but what dpkg, systemd and the logs keep for
# themselves. (The overlay's lower layer is the live host: its builds write elsewhere meanwhile.)
snapshot() {
  find /etc /usr /var /opt /srv -xdev \( -path /var/lib/dpkg -o -path /var/log -o -path /var/cache \
    -o -path /var/lib/systemd -o -path /var/tmp -o -path /etc/ld.so.cache \) -prune -o -print |
    LC_ALL=C sort
}
listening() { (exec 3<>/dev/tcp/127.0.0.1/29400) 2>/dev/null; }
man_finds() { man -w "$1" >/dev/null; }

snapshot >/run/files-before
check "dpkg -i installs mxrun and python3-mxrun" dpkg -i /check/debs/mxrun_*.deb /check/debs/python3-mxrun_*.deb
check "mxrun --version on the PATH" mxrun --version
for page in mxrun mxrun-master mxrun-multinode; do
  check "man $page finds its page" man_finds "$page"
done
check "man mxrun shows the flags" grep -q -- "--nproc_per_node" <<<"$(MANWIDTH=100 man mxrun 2>&1)"
check "mxrun-master is installed but not enabled" test "$(systemctl is-enabled mxrun-master)" = disabled
check "mxrun-master is not started by the install" test "$(systemctl is-active mxrun-master)" = inactive
check "the system Python imports the module from the package" \
  test "$(cd / && python3 -c 'import mxrun; print(mxrun.__file__)')" = /usr/lib/python3/dist-packages/mxrun/__init__.py
check "python3-mxrun is byte-compiled at install" test -d /usr/lib/python3/dist-packages/mxrun/__pycache__

check "systemctl start mxrun-master" systemctl start mxrun-master
check "mxrun-master is active (Type=notify: ready once serving)" test "$(systemctl is-active mxrun-master)" = active
# Type=notify: systemctl start returns once the master said READY, which it says once it serves.
check "mxrun-master listens on its port 29400" listening
check "mxrun-master runs as a dynamic user, not root" \
  test "$(ps -o user= -p "$(systemctl show -P MainPID mxrun-master)" | tr -d ' ')" != root

# One job through the agent's unit and that master: two workers of the system Python that import
# the packaged module and report steps.
cat >/check/worker.py <<'EOF'
import os
import mxrun
for step in range(1, 4):
    mxrun.step_done(step)
print(f"check worker rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}: {mxrun.__file__}", flush=True)
EOF
cat >/etc/mxrun/check.toml <<'EOF'
nnodes = "1"
nproc_per_node = "2"
rdzv_backend = "c10d"
rdzv_endpoint = "127.0.0.1:29400"
rdzv_id = "deb-check"
entrypoint = "/check/worker.py"
EOF
# --wait: systemctl returns when the unit has ended, the job done.
check "systemctl start --wait mxrun-agent@check: the job ends within 60 s" \
  timeout 60 systemctl start --wait mxrun-agent@check
check "the agent's unit ends with success" test "$(systemctl show -P Result mxrun-agent@check)" = success
journal=$(journalctl -u mxrun-agent@check -o cat --no-pager)
for rank in 0 1; do
  check "worker $rank ran the packaged module under the agent's unit" \
    grep -q "check worker rank $rank of 2: /usr/lib/python3/dist-packages/mxrun/__init__.py" <<<"$journal"
done
if grep -q "goodput .*steps redone)$" <<<"$journal"; then
  ok "the agent's summary counts the workers' progress reports"
else
  bad "the agent's summary: $(grep goodput <<<"$journal" || echo none); its journal ends:"
  tail -20 <<<"$journal"
fi
check "systemctl enable mxrun-master" systemctl enable --quiet mxrun-master

check "dpkg -r removes both packages" dpkg -r python3-mxrun mxrun
check "removal stopped mxrun-master" test "$(systemctl is-active mxrun-master)" != active
check "removal took the programs, the units and the module" \
  test ! -e /usr/bin/mxrun -a ! -e /usr/bin/mxrun-master -a ! -e /usr/lib/systemd/system/mxrun-master.service \
  -a ! -e /usr/lib/python3/dist-packages/mxrun
check "removal kept the conffile /etc/mxrun/example.toml" test -f /etc/mxrun/example.toml
check "dpkg --purge purges both" dpkg --purge python3-mxrun mxrun
check "purge kept the operator's /etc/mxrun/check.toml" test -f /etc/mxrun/check.toml
rm -f /etc/mxrun/check.toml /check/worker.py
rmdir /etc/mxrun 2>/dev/null
snapshot >/run/files-after
left=$(comm -13 /run/files-before /run/files-after)
if [[ -z "$left" ]]; then
  ok "after purge no file is left behind (the enable link and the master's state included)"
else
  bad "left behind after purge: $(echo "$left" | tr '\n' ' ')"
fi
echo "check-installed: done"
systemctl --no-block poweroff
