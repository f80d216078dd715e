#!/usr/bin/env bash
# Prints, one block per failed or errored test, the test's class and name, its time, and the first
# lines of its failure message, from the JUnit XML reports (Surefire's, Failsafe's, the console
# launcher's legacy XML) found under the given directories. Prints nothing when none failed.
#
#   .ci/failures.sh DIR...    (.ci/run calls it at its end, so the tail of CI's log names the test)
#
# Exit status: 0 always (a digest, not a verdict: the tiers' own exit statuses decide).
set -uo pipefail
LINES_PER_FAILURE=${LINES_PER_FAILURE:-6}
mapfile -t FILES < <(find "$@" -type f -name 'TEST-*.xml' 2>/dev/null | sort)
((${#FILES[@]})) || exit 0
awk -v max="$LINES_PER_FAILURE" '
    function attr(s, name,   m) {
        if (match(s, " " name "=\"[^\"]*\"")) { m = substr(s, RSTART + length(name) + 3, RLENGTH - length(name) - 4); return m }
        return ""
    }
    function unescape(s) {
        gsub(/&#10;/, "\n", s); gsub(/&#13;/, "", s); gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s)
        gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s); gsub(/&amp;/, "\\&", s)
        return s
    }
    /<testcase / { tc = attr($0, "classname") "." attr($0, "name"); t = attr($0, "time") }
    /<(failure|error)[ >]/ {
        kind = ($0 ~ /<failure/) ? "FAILED" : "ERROR"
        msg = unescape(attr($0, "message")); type = attr($0, "type")
        printf "[ci] %s %s (%s s) in %s\n", kind, tc, t, FILENAME
        n = split(msg, parts, "\n")
        if (type != "") printf "[ci]     %s\n", type
        for (i = 1; i <= n && i <= max; i++) printf "[ci]     %s\n", parts[i]
        if (n > max) printf "[ci]     ... (%d more lines in the report)\n", n - max
    }
' "${FILES[@]}"
exit 0
