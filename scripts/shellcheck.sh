#!/usr/bin/env bash
# scripts/shellcheck.sh — runs shellcheck over every shell script in the repository: of the files
# git knows (tracked, or new and not ignored), those named *.sh and those whose first line is a
# shell's #! line (.ci/run, mvnw, verbs-perf, examples/run, ...), following sourced files (-x,
# paths relative to each script's folder). A comment whose first word is the tool's name reads
# as a directive to it: start such a line otherwise.
#
#   scripts/shellcheck.sh [--list] [shellcheck options]
#     --list   print the scripts it would check, one a line, and exit
#
# Exit status: shellcheck's (0 only when no script has a finding at shellcheck's default severity,
# style included); 2 when shellcheck is not installed (apt-get install shellcheck).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts() {
    local f first
    while IFS= read -r -d '' f; do
        [[ -f "$f" && ! -L "$f" ]] || continue
        if [[ "$f" == *.sh ]]; then
            printf '%s\n' "$f"
        else
            IFS= read -r first <"$f" 2>/dev/null || continue
            [[ "$first" =~ ^\#!.*(/|[[:space:]])(ba|da|k)?sh([[:space:]]|$) ]] && printf '%s\n' "$f"
        fi
    done < <(git ls-files -z --cached --others --exclude-standard)
    return 0
}
if [[ "${1:-}" == --list ]]; then scripts; exit 0; fi
command -v shellcheck >/dev/null || { echo "shellcheck.sh: shellcheck is not installed (apt-get install shellcheck)" >&2; exit 2; }
mapfile -t FILES < <(scripts)
((${#FILES[@]})) || { echo "shellcheck.sh: no shell scripts found (not in a git work tree?)" >&2; exit 2; }
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p') on ${#FILES[@]} scripts: ${FILES[*]}"
shellcheck -x -P SCRIPTDIR "$@" "${FILES[@]}"
