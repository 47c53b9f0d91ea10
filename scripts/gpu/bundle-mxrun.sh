#!/usr/bin/env bash
# Packs mxrun for a GPU machine that has PyTorch but none of Debian's packages (issue 28):
#
#   scripts/gpu/bundle-mxrun.sh [BUNDLE_DIR]      (default: .gpu-bundle, ignored by git)
#
# Builds mxrun, mxrun-multinode, mxrun-master, store_serve and store_loadgen (scripts/build.sh) and
# copies them, without their debug sections, to BUNDLE_DIR/bin with every shared library they load
# except glibc's in
# BUNDLE_DIR/lib (scripts/vendor-libs.sh: RPATH $ORIGIN, so nothing on the other machine is
# searched for them and no LD_LIBRARY_PATH leaks into the workers mxrun starts). glibc stays the
# machine's own: a newer glibc runs programs linked against Debian 12's. Also fills
# .deps/include with the headers scripts/gpu/build-trainer-cuda.sh needs there (CLI11, nlohmann/json,
# Catch2). Carry both folders: run(carry=[".gpu-bundle", ".deps"]), then scripts/gpu/run-all.sh.
# Checks that the bundle's programs start with only its own libraries and prints its size.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bundle="${1:-$root/.gpu-bundle}"
# store_serve and store_loadgen: the workers' store at scale on a machine of many cores (run-all's
# store-scale step).
programs=(mxrun mxrun-multinode mxrun-master store_serve store_loadgen)

MXRUN_BUILD_TARGETS="${programs[*]}" "$root/scripts/build.sh" >&2
"$root/scripts/gpu/build-trainer-cuda.sh" --vendor-headers >&2

rm -rf "$bundle"
"$root/scripts/vendor-libs.sh" "$bundle/bin" "$bundle/lib" "${programs[@]/#/$build/bin/}"
env -i "$bundle/bin/mxrun" --version >/dev/null
git -C "$root" rev-parse HEAD >"$bundle/COMMIT" 2>/dev/null || true
echo "bundle-mxrun: $bundle: ${programs[*]} and $(ls "$bundle/lib" | wc -l) libraries, $(du -sh "$bundle" | cut -f1)"
