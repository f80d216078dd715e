#!/usr/bin/env bash
# test-classpath.sh — sourced by softroce/guest-tests.sh and softroce/two-hosts-fault.sh: one class
# path with every module's target/classes and target/test-classes (a snapshot) and all test-scope
# dependencies, for JVMs that run in a Soft-RoCE guest, where the share is mounted at the same
# absolute path as on the host.
#
#   build_test_classpath ROOT WORK MVN...
#     runs `MVN -q test-compile dependency:build-classpath` (includeScope=test, every module) in ROOT;
#     copies each module's target/classes and target/test-classes to WORK/modules/<module>/ (so a
#     host rebuild while the guest runs changes nothing); sets
#       OWN        the snapshot folders, in reactor order
#       TEST_DIRS  the snapshot test-classes folders
#       CP         the whole class path (OWN first, then the de-duplicated dependencies)
#     and writes CP, one entry a line, to WORK/classpath.txt. Returns non-zero on failure.
#     Callers in one work tree take turns (a lock on target/.test-classpath.lock): Maven and the
#     per-module target/guest-tier-classpath.txt files are shared (.ci/run runs tiers side by side).

build_test_classpath() {
    mkdir -p "$1/target"
    local lock_fd
    exec {lock_fd}>"$1/target/.test-classpath.lock"
    flock "$lock_fd"
    local rc=0
    build_test_classpath_locked "$@" || rc=$?
    exec {lock_fd}>&-
    return $rc
}

build_test_classpath_locked() {
    local ROOT="$1" WORK="$2"
    shift 2
    local MVN=("$@")
    local m d f CP_ALL
    echo "[test-classpath] class path: ./mvnw test-compile dependency:build-classpath (includeScope=test, every module)"
    # test-compile makes the reactor resolve the project's own modules to their target/classes and
    # target/test-classes (no install needed); it recompiles nothing when the classes are current.
    (cd "$ROOT" && "${MVN[@]}" -q test-compile dependency:build-classpath \
        -Dmdep.outputFile=target/guest-tier-classpath.txt -Dmdep.includeScope=test) || {
        echo "[test-classpath] ERROR: dependency:build-classpath failed" >&2; return 1; }

    # The modules, in reactor order, from the parent pom.
    local MODULES
    mapfile -t MODULES < <(sed -n 's:^ *<module>\([^<]*\)</module>.*:\1:p' "$ROOT/pom.xml")
    ((${#MODULES[@]})) || { echo "[test-classpath] ERROR: no <module> in pom.xml" >&2; return 1; }
    # Every module's classes and test-classes go first on the class path, as a snapshot copied into
    # WORK/modules/ so that a rebuild on the host while the guest runs changes nothing.
    OWN=()
    TEST_DIRS=()
    for m in "${MODULES[@]}"; do
        for d in classes test-classes; do
            [[ -d "$ROOT/$m/target/$d" ]] || continue
            mkdir -p "$WORK/modules/$m"
            rm -rf "${WORK:?}/modules/$m/$d"
            cp -a "$ROOT/$m/target/$d" "$WORK/modules/$m/$d"
            OWN+=("$WORK/modules/$m/$d")
            [[ $d == test-classes ]] && TEST_DIRS+=("$WORK/modules/$m/$d")
        done
    done

    # Dependencies of all modules, de-duplicated: one entry per groupId/artifactId in the local
    # repository (first wins). Dropped: the project's own artifacts (their class folders are already
    # first) and the JUnit Platform/Jupiter, opentest4j and apiguardian jars, which the console
    # launcher (same versions, from the same BOM) brings itself.
    CP_ALL="$(for m in "${MODULES[@]}"; do
        f="$ROOT/$m/target/guest-tier-classpath.txt"
        [[ -s "$f" ]] && { tr ':' '\n' <"$f"; echo; }
    done | awk -v root="$ROOT/" '
        $0 == "" { next }
        index($0, root) == 1 { next }                           # the project: classes dirs or jars
        /\/org\/verbs4j\// { next }                             # the project, installed
        /\/org\/junit\/|\/org\/opentest4j\/|\/org\/apiguardian\// { next }
        {
            key = $0
            if (match($0, /\/[^\/]+\/[^\/]+$/)) key = substr($0, 1, RSTART - 1)  # .../group/artifact
            if (!(key in seen)) { seen[key] = 1; print }
        }')"
    CP="$(printf '%s\n' "${OWN[@]}" "$CP_ALL" | grep -v '^$' | paste -sd: -)"
    printf '%s\n' "$CP" | tr ':' '\n' >"$WORK/classpath.txt"
    echo "[test-classpath] class path: $(wc -l <"$WORK/classpath.txt") entries (list in $WORK/classpath.txt)"
}
