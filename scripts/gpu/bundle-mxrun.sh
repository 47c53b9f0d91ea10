#!/usr/bin/env bash
# Packs mxrun for a GPU machine that has PyTorch but none of Debian's packages (issue 28):
#
#   scripts/gpu/bundle-mxrun.sh [BUNDLE_DIR]      (default: .gpu-bundle, ignored by git)
#
# Builds mxrun, mxrun-multinode and mxrun-master (scripts/build.sh) and copies them, without
# their debug sections, to BUNDLE_DIR/bin with every shared library they load except glibc's in
# BUNDLE_DIR/lib; each file's RPATH then points at that folder ($ORIGIN), so nothing on the other
# machine is searched for them and no LD_LIBRARY_PATH leaks into the workers mxrun starts. glibc
# stays the machine's own: a newer glibc runs programs linked against Debian 12's. Also fills
# .deps/include with the headers scripts/build-trainer-cuda.sh needs there (CLI11, nlohmann/json,
# Catch2). Carry both folders: run(carry=[".gpu-bundle", ".deps"]), then scripts/gpu/run-all.sh.
# Checks that the bundle's programs start with only its own libraries and prints its size.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bundle="${1:-$root/.gpu-bundle}"
programs=(mxrun mxrun-multinode mxrun-master)
command -v patchelf >/dev/null || { echo "bundle-mxrun: patchelf is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }

MXRUN_BUILD_TARGETS="${programs[*]}" "$root/scripts/build.sh" >&2
"$root/scripts/build-trainer-cuda.sh" --vendor-headers >&2

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
# glibc's own libraries: the other machine's (newer) glibc provides them.
is_glibc() {
  case "$(basename "$1")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*|\
    libanl.so.*|ld-linux*|libmvec.so.*) return 0 ;;
  esac
  return 1
}
for program in "${programs[@]}"; do
  cp "$build/bin/$program" "$bundle/bin/"
  strip --strip-debug "$bundle/bin/$program"
  while read -r path; do
    [[ -n "$path" ]] || continue
    is_glibc "$path" && continue
    [[ -f "$bundle/lib/$(basename "$path")" ]] || cp -L "$path" "$bundle/lib/"
  done < <(ldd "$build/bin/$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
  if ldd "$build/bin/$program" | grep -q "not found"; then
    echo "bundle-mxrun: $program has unresolved libraries here: $(ldd "$build/bin/$program" | grep 'not found')" >&2
    exit 1
  fi
done
for lib in "$bundle"/lib/*; do
  chmod u+w "$lib"
  patchelf --force-rpath --set-rpath '$ORIGIN' "$lib"
done
for program in "${programs[@]}"; do
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$bundle/bin/$program"
done

# Each program must load only glibc from outside the bundle.
for program in "${programs[@]}"; do
  outside=$(env -i ldd "$bundle/bin/$program" | awk '$2 == "=>" {print $3}' |
            while read -r p; do
              [[ "$(readlink -f "$p")" == "$(readlink -f "$bundle")"/lib/* ]] || is_glibc "$p" || echo "$p"
            done)
  if [[ -n "$outside" ]]; then
    echo "bundle-mxrun: $program still loads from outside the bundle: $outside" >&2
    exit 1
  fi
done
env -i "$bundle/bin/mxrun" --version >/dev/null
git -C "$root" rev-parse HEAD >"$bundle/COMMIT" 2>/dev/null || true
echo "bundle-mxrun: $bundle: ${programs[*]} and $(ls "$bundle/lib" | wc -l) libraries, $(du -sh "$bundle" | cut -f1)"
