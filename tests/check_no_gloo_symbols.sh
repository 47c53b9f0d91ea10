#!/usr/bin/env bash
# train compiles against Debian's Gloo headers (the torch wheel ships none) but must run only the
# wheel's Gloo, inside libtorch_cpu.so: it may define no Gloo symbol of its own (an inline Gloo
# function or vtable emitted into train would take the place of the wheel's at run time).
#   check_no_gloo_symbols.sh TRAIN LIBTORCH_CPU
# The pattern is checked on libtorch_cpu.so first, which does define Gloo's symbols, so a pattern
# that matches nothing cannot pass by accident.
set -euo pipefail
train="$1"
libtorch_cpu="$2"
pattern=' (gloo::|c10d::ProcessGroupGloo::GlooStore)'  # a symbol whose name is in Gloo (not a std template over it)
in_lib=$(nm -D -C --defined-only "$libtorch_cpu" | grep -cE "$pattern" || true)
if [[ "$in_lib" -eq 0 ]]; then
  echo "FAILED: the pattern finds no Gloo symbol in $libtorch_cpu either: the check is broken" >&2
  exit 1
fi
found=$(nm -C --defined-only "$train" | grep -E "$pattern" || true)
if [[ -n "$found" ]]; then
  echo "FAILED: $train defines Gloo symbols of its own (compiled from Debian's Gloo headers):" >&2
  echo "$found" | head -20 >&2
  exit 1
fi
echo "ok: $train defines no Gloo symbol ($in_lib in $(basename "$libtorch_cpu"))"
