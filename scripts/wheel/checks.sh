# shellcheck shell=bash disable=SC2034  # (variables for the scripts that source this)
# Shared by scripts/check-wheel.sh and scripts/check-pip-install.sh: source it after lib.sh with
# check_name set. It gives them their ok/bad counters (passed, failed), a count of what
# scripts/wheel/check-installed.sh printed, their closing verdict, and a fresh environment that
# holds the project's pinned PyTorch alone.

passed=0
failed=0
ok() { echo "$check_name: ok: $*"; passed=$((passed + 1)); }
bad() { echo "$check_name: FAILED: $*"; failed=$((failed + 1)); }

# Counts check-installed.sh's "ok: ..." and "bad: ..." lines, read from stdin.
count_installed_checks() {
  local line
  while IFS= read -r line; do
    case "$line" in
      ok:*) ok "${line#ok: }" ;;
      bad:*) bad "${line#bad: }" ;;
    esac
  done
}

# fresh_torch_venv DIR: a new venv in DIR with scripts/python-env.sh's torch pin (torch_pin), and
# nothing else; exits on failure with pip's last lines.
fresh_torch_venv() {
  /usr/bin/python3 -m venv "$1"
  torch_pin=$(grep -oE '^  torch==[0-9.]+' "$root/scripts/python-env.sh" | head -1 | tr -d ' ')
  "$1/bin/python3" -m pip install -q --disable-pip-version-check "$torch_pin" >"$1/pip-torch.log" 2>&1 ||
    { tail -20 "$1/pip-torch.log"; echo "$check_name: pip install $torch_pin failed"; exit 1; }
}

# The closing line, and the exit status: 0 when nothing failed.
report_checks() {
  echo "$check_name: $passed passed, $failed failed"
  [[ $failed == 0 ]]
}
