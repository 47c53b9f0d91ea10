# Shared by the bench scripts (sourced, not run). Needs TORCHRUN, PYTHON and repo_root set.

# Sets torch_py (the interpreter on torchrun's #! line), git_rev (HEAD, marked when the work tree
# differs) and cpu_model, for the provenance lines every report starts with.
bench_detect_env() {
    torch_py="$(head -n1 "$TORCHRUN" | sed -n 's/^#![[:space:]]*//p' | cut -d' ' -f1)"
    [ -x "$torch_py" ] || torch_py="$PYTHON"
    git_rev="$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if [ "$git_rev" != unknown ] && [ -n "$(git -C "$repo_root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        git_rev+=" (working tree modified)"
    fi
    cpu_model="$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^model name[[:space:]]*:[[:space:]]*//' || true)"
}
