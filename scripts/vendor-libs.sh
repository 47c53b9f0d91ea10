#!/usr/bin/env bash
# Copies programs with the shared libraries they load, so that they run on a machine that has none
# of this machine's packages (the GPU machine's bundle, the wheel):
#
#   scripts/vendor-libs.sh [--system-cxx] BIN_DIR LIB_DIR PROGRAM...
#
# Each PROGRAM (a path) goes to BIN_DIR without its debug sections; every shared library it loads
# goes to LIB_DIR, except glibc's (every Linux has a glibc, and a newer one runs programs linked
# against Debian 12's) and, with --system-cxx, the C++ runtime's (libstdc++, libgcc_s: what
# manylinux wheels may take from the system too). RPATH then points from each program to LIB_DIR
# ($ORIGIN and the path between the two folders, which must keep their places relative to each
# other) and from each library to its neighbours ($ORIGIN), as `auditwheel repair` does; no
# LD_LIBRARY_PATH is needed, so none leaks into the workers mxrun starts. Checks that every program
# then loads nothing from outside but what was left out. Needs patchelf.
set -euo pipefail
system_cxx=0
if [[ "${1:-}" == --system-cxx ]]; then system_cxx=1; shift; fi
[[ $# -ge 3 ]] || { echo "usage: scripts/vendor-libs.sh [--system-cxx] BIN_DIR LIB_DIR PROGRAM..." >&2; exit 2; }
bin_dir=$1 lib_dir=$2
shift 2
command -v patchelf >/dev/null || { echo "vendor-libs: patchelf is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
mkdir -p "$bin_dir" "$lib_dir"
rpath="\$ORIGIN/$(realpath --relative-to="$bin_dir" "$lib_dir")"

left_out() {  # libraries taken from the machine the programs run on
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*|\
    libanl.so.*|ld-linux*|libmvec.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) [[ $system_cxx == 1 ]] && return 0 ;;
  esac
  return 1
}

for program in "$@"; do
  [[ -x "$program" ]] || { echo "vendor-libs: $program is not an executable" >&2; exit 2; }
  if ldd "$program" | grep -q "not found"; then
    echo "vendor-libs: $program has unresolved libraries here: $(ldd "$program" | grep 'not found')" >&2
    exit 1
  fi
  copy="$bin_dir/$(basename "$program")"
  cp "$program" "$copy"
  chmod u+w "$copy"
  strip --strip-debug "$copy"
  while read -r path; do
    [[ -n "$path" ]] || continue
    left_out "$path" && continue
    target="$lib_dir/$(basename "$path")"
    if [[ ! -f "$target" ]]; then
      cp -L "$path" "$target"
      chmod u+w "$target"
      strip --strip-debug "$target"
      patchelf --force-rpath --set-rpath '$ORIGIN' "$target"
    fi
  done < <(ldd "$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
  patchelf --force-rpath --set-rpath "$rpath" "$copy"
done

# Each program must now load only what was left out from outside LIB_DIR.
for program in "$@"; do
  copy="$bin_dir/$(basename "$program")"
  outside=$(env -i ldd "$copy" | awk '$2 == "=>" {print $3}' |
            while read -r p; do
              [[ "$(readlink -f "$p")" == "$(readlink -f "$lib_dir")"/* ]] || left_out "$p" || echo "$p"
            done)
  if [[ -n "$outside" ]]; then
    echo "vendor-libs: $copy still loads from outside $lib_dir: $outside" >&2
    exit 1
  fi
done
