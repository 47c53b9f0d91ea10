#!/usr/bin/env bash
# The guide as a static site (issue 59): README.md as its home, docs/guide/ by task, the contract,
# the architecture and the benchmarks, built by MkDocs with the Material theme (mkdocs.yml).
#
#   scripts/build-docs.sh [--check] [OUT_DIR]     (default: build/site; open OUT_DIR/index.html)
#
# The build is strict: a warning fails it, and every internal link and anchor is checked (MkDocs's
# validation, with GitHub's anchors so a link works on GitHub and on the site alike). --check, as
# scripts/test.sh runs it, then also runs tests/check_docs.py (the pages' sizes, the old long
# pages' headings, what is within two links of the README), draws the pictures again from their
# code and data (scripts/docs/pictures.py) and compares them with docs/images, and loads the built
# getting-started page in headless Chromium: its text must be there (--dump-dom) and its
# screenshot must not be blank.
# Prints "build-docs: ..." lines; exit 0 when everything holds.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
check=0
if [[ "${1:-}" == --check ]]; then check=1; shift; fi
out="${1:-$build/site}"
docs_venv=$("$root/scripts/python-env.sh" docs)
log=$(mktemp "${TMPDIR:-/tmp}/mxrun-build-docs.XXXXXX")
trap 'rm -f -- "$log"' EXIT
# The flag references: the Markdown that mxrun-man-pages writes beside the manual pages.
MXRUN_BUILD_TARGETS="mxrun mxrun-master man-pages" "$root/scripts/build.sh" >"$log" 2>&1 ||
  { tail -20 "$log" >&2; echo "build-docs: building the manual pages failed" >&2; exit 1; }
export MXRUN_REFERENCE_DIR="$build/man"

started=$SECONDS
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2, printed on every build, says nothing
# about this site.
if ! NO_MKDOCS_2_WARNING=1 "$docs_venv/bin/mkdocs" build --strict --clean -f "$root/mkdocs.yml" \
     -d "$out" >"$log" 2>&1; then
  grep -vE '^INFO' "$log" >&2 || cat "$log" >&2
  echo "build-docs: mkdocs build --strict failed (above: why)" >&2
  exit 1
fi
pages=$(find "$out" -name index.html | wc -l)
echo "build-docs: $out: $pages pages, $(du -sh "$out" | cut -f1), in $((SECONDS - started)) s (mkdocs --strict: every internal link and anchor resolves)"
((check)) || exit 0

failed=0
if out_docs=$("$docs_venv/bin/python3" "$root/tests/check_docs.py" "$root" 2>&1); then
  echo "build-docs: ok: $out_docs"
else
  echo "$out_docs"
  failed=1
fi

# The pictures are what their code and data draw: drawn again, each equals the committed one.
redrawn=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-pictures.XXXXXX")
if drew=$("$docs_venv/bin/python3" "$root/scripts/docs/pictures.py" "$redrawn" 2>&1); then
  differ=()
  for picture in "$redrawn"/*.svg; do
    cmp -s "$picture" "$root/docs/images/$(basename "$picture")" || differ+=("$(basename "$picture")")
  done
  for picture in "$root"/docs/images/*.svg; do
    [[ -e "$redrawn/$(basename "$picture")" ]] || differ+=("$(basename "$picture") (no code or data draws it)")
  done
  if ((${#differ[@]} == 0)); then
    echo "build-docs: ok: the $(ls "$redrawn" | wc -l) pictures in docs/images are what scripts/docs/pictures.py draws from docs/data"
  else
    echo "build-docs: FAILED: docs/images differs from what scripts/docs/pictures.py draws: ${differ[*]} (redraw: .venv-docs/bin/python3 scripts/docs/pictures.py docs/images)"
    failed=1
  fi
else
  echo "build-docs: FAILED: scripts/docs/pictures.py: $drew"
  failed=1
fi
rm -rf -- "$redrawn"

# The flag reference names exactly the flags of `mxrun --help` (and the master's, of its --help).
for program in mxrun mxrun-master; do
  helped=$("$build/bin/$program" --help | grep -oE '^ +(-[a-z],)?--[a-z0-9_]+' | grep -oE -- '--[a-z0-9_]+' | sort -u)
  listed=$(grep -E '^### ' "$build/man/$program.md" | grep -oE '`--[a-z0-9_]+`' | tr -d '`' | sort -u)
  if [[ -n "$helped" && "$helped" == "$listed" ]]; then
    echo "build-docs: ok: the site's reference/$program lists the $(wc -l <<<"$helped") flags of $program --help, no more, no fewer"
  else
    echo "build-docs: FAILED: reference/$program and $program --help differ: $(diff <(echo "$helped") <(echo "$listed") | grep '^[<>]' | tr '\n' ' ')"
    failed=1
  fi
done
if [[ -f "$out/reference/mxrun/index.html" ]]; then
  echo "build-docs: ok: the site has the flag references (reference/mxrun/, reference/mxrun-master/)"
else
  echo "build-docs: FAILED: the site has no reference/mxrun/ page"
  failed=1
fi

# The built getting-started page in headless Chromium, with a profile of its own.
page="$out/guide/getting-started/index.html"
profile=$(mktemp -d "${TMPDIR:-/tmp}/mxrun-docs-chromium.XXXXXX")
shot="$profile/getting-started.png"
trap 'rm -f -- "$log"; rm -rf -- "$profile"' EXIT
chromium=(chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$profile"
          --window-size=1200,900)
dom=$(timeout 60 "${chromium[@]}" --dump-dom "file://$page" 2>/dev/null || true)
if [[ "$dom" == *"Getting started"* && "$dom" == *"pip install"* && "$dom" == *"Two workers on this machine"* ]]; then
  echo "build-docs: ok: Chromium renders $(realpath --relative-to="$root" "$page"): its title, the install and the first job are there"
else
  echo "build-docs: FAILED: Chromium's DOM of $page lacks the page's text ($(echo "$dom" | wc -c) bytes)"
  failed=1
fi
timeout 60 "${chromium[@]}" --screenshot="$shot" "file://$page" >/dev/null 2>&1 || true
if verdict=$("$docs_venv/bin/python3" "$root/scripts/docs/png_not_blank.py" "$shot" 2>&1); then
  echo "build-docs: ok: the screenshot of the getting-started page is not blank ($verdict)"
else
  echo "build-docs: FAILED: the screenshot of the getting-started page: $verdict"
  failed=1
fi
exit "$failed"
