#!/usr/bin/env bash
# guest-tests.sh — the guest tier: run every @RdmaTest (JUnit tag "rdma") of every module in ONE
# JVM in ONE fresh Soft-RoCE qemu guest (softroce/run-in-guest.sh), then report on the host.
#
# Usage: softroce/guest-tests.sh [--no-build] [--timeout SECONDS] [-- extra console-launcher args]
#   --no-build   reuse the build in the work tree (e.g. after `./mvnw verify`); the class-path step
#                still runs `test-compile`, which recompiles nothing when the classes are current
#   --timeout S  bound on the whole guest, boot included (default 2400)
#   -- ARGS      passed to the JUnit console launcher, e.g. `-- --select-class=org.x.FooTest`
#                (replaces the default selection `--scan-class-path <test-classes dirs>`)
#
# Steps:
#   1. host: `./mvnw -B -q install -DskipTests` (unless --no-build); one class path with every
#      module's target/classes and target/test-classes and all test-scope dependencies
#      (dependency:build-classpath per module, de-duplicated); junit-platform-console-standalone
#      (the version of the junit BOM's platform) copied into target/guest-tier/.
#   2. guest: `rdma res show`, then one JVM: the console launcher with --include-tag rdma,
#      VERBS4J_REQUIRE_RDMA=1 (a missing device FAILS the tests instead of skipping them),
#      XML reports in target/guest-reports/; then `rdma res show` again. The test JVM also prints
#      the rdma resources it still holds when all tests are done (RdmaResourceReport).
#   3. host: parse the reports and print `Guest-tier: N passed, M failed, K skipped`.
#
# Exit status: 0 only if the guest command exited 0, M == 0 and N > 0.
# Concurrency: runs in one work tree are serialized (flock on a lock file in $TMPDIR), and the guest
# runs on a snapshot of the class folders (target/guest-tier/modules), so a host rebuild during
# the guest run changes nothing.
# Output: everything streams to stdout; the guest console is also in target/guest-console.log.
# VERBS4J_GUEST_KERNEL=6.12 (see build-guest.sh) boots Debian's 6.12 kernel instead; the folders
# and the console log then end in -6.12 (target/guest-reports-6.12/, ...), with a lock of their own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD=1
TIMEOUT=2400
EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --no-build) BUILD=0; shift ;;
    --timeout) TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "guest-tests.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

START=$SECONDS
KSUFFIX="${VERBS4J_GUEST_KERNEL:+-$VERBS4J_GUEST_KERNEL}"
say() { echo "[guest-tests +$((SECONDS - START))s] $*"; }
die() { echo "[guest-tests] ERROR: $*" >&2; exit 1; }

# One guest-tests.sh at a time per work tree: a second run would clobber target/guest-tier and
# target/guest-reports under the first, and two TCG guests on a 2-core machine starve each other.
LOCK="${TMPDIR:-/tmp}/verbs4j-guest-tests.$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)$KSUFFIX.lock"
exec 9>"$LOCK"
if ! flock -n 9; then
    say "another guest-tests.sh is running in $ROOT: waiting for it (lock $LOCK)"
    flock -w "$TIMEOUT" 9 || die "still locked after ${TIMEOUT}s: $LOCK"
    say "lock acquired"
fi

# shellcheck source=../scripts/java25.sh
. "$ROOT/scripts/java25.sh" || die "no Java 25 JDK (see scripts/java25.sh)"
MVN=("$ROOT/mvnw" -B -ntp)

WORK="$ROOT/target/guest-tier$KSUFFIX"
REPORTS="$ROOT/target/guest-reports$KSUFFIX"
export VERBS4J_GUEST_LOG="${VERBS4J_GUEST_LOG:-$ROOT/target/guest-console$KSUFFIX.log}"
rm -rf "$WORK" "$REPORTS"
mkdir -p "$WORK" "$REPORTS"

# ---------------------------------------------------------------------------------------------
# 1. Build, class path, console launcher (host).
# ---------------------------------------------------------------------------------------------
if [[ $BUILD == 1 ]]; then
    say "build: ./mvnw -B -q install -DskipTests"
    "${MVN[@]}" -q install -DskipTests || die "the build failed"
fi

# shellcheck source=test-classpath.sh
. "$ROOT/softroce/test-classpath.sh"
build_test_classpath "$ROOT" "$WORK" "${MVN[@]}" || die "could not build the test class path"
((${#TEST_DIRS[@]})) || die "no target/test-classes in any module: nothing to test"

PLATFORM_VERSION="$(sed -n 's:.*<junit\.platform\.version>\([^<]*\)</junit\.platform\.version>.*:\1:p' pom.xml | head -n1)"
if [[ -z "$PLATFORM_VERSION" ]]; then   # junit 5.x.y ships platform 1.x.y
    PLATFORM_VERSION="$(sed -n 's:.*<junit\.version>5\.\([^<]*\)</junit\.version>.*:1.\1:p' pom.xml | head -n1)"
fi
[[ -n "$PLATFORM_VERSION" ]] || die "cannot tell the JUnit Platform version from pom.xml"
LAUNCHER_ART="org.junit.platform:junit-platform-console-standalone:$PLATFORM_VERSION"
say "console launcher: $LAUNCHER_ART"
"${MVN[@]}" -q -N dependency:copy -Dartifact="$LAUNCHER_ART" -DoutputDirectory="$WORK" ||
    die "could not fetch $LAUNCHER_ART"
LAUNCHER="$WORK/junit-platform-console-standalone-$PLATFORM_VERSION.jar"
[[ -s "$LAUNCHER" ]] || die "$LAUNCHER missing after dependency:copy"

# ---------------------------------------------------------------------------------------------
# 2. The guest: one JVM for every @RdmaTest.
# ---------------------------------------------------------------------------------------------
if ((${#EXTRA[@]})); then
    SELECT=("${EXTRA[@]}")
else
    SELECT=(--scan-class-path "$(IFS=:; echo "${TEST_DIRS[*]}")")
fi
# A crash of the test JVM leaves its log in target/hs_err/ (on the host, through the share), where
# .ci/run looks for it. NMT summary lets ResourceCyclesGuestTest check the JVM's native memory.
mkdir -p "$ROOT/target/hs_err"
JUNIT=(java --enable-native-access=ALL-UNNAMED -XX:NativeMemoryTracking=summary "-XX:ErrorFile=$ROOT/target/hs_err/hs_err_pid%p.log" -jar "$LAUNCHER" execute
    --class-path "@CP@" "${SELECT[@]}"
    --include-engine junit-jupiter --include-tag rdma --fail-if-no-tests
    --reports-dir "$REPORTS" --details=tree --disable-banner --disable-ansi-colors)
# A second JVM in unchecked mode (-Dverbs4j.unchecked=true) runs the @Tag("unchecked") tests: what
# keeps the JVM safe holds in both modes, and some failures can only be provoked without checks.
UNCHECKED=(java --enable-native-access=ALL-UNNAMED -Dverbs4j.unchecked=true
    "-XX:ErrorFile=$ROOT/target/hs_err/hs_err_pid%p.log" -jar "$LAUNCHER" execute
    --class-path "@CP@" "${SELECT[@]}"
    --include-engine junit-jupiter --include-tag unchecked --fail-if-no-tests
    --reports-dir "$REPORTS/unchecked" --details=tree --disable-banner --disable-ansi-colors)
# shellcheck disable=SC2016  # (the generated script's own variables, in single quotes)
{
    echo '#!/usr/bin/env bash'
    echo '# generated by softroce/guest-tests.sh; runs in the Soft-RoCE guest'
    echo 'set -u'
    echo 'export VERBS4J_REQUIRE_RDMA=1'
    printf 'CP=%q\n' "$CP"
    echo 'echo "===== rdma res show (before the test JVM) ====="; rdma res show'
    echo 'echo "===== java -version ====="; java -version 2>&1'
    printf 'echo "===== JUnit: %s ====="\n' "tag rdma, one JVM"
    printf '%q ' "${JUNIT[@]}" | sed 's/@CP@/"$CP"/'
    echo
    echo 'rc=$?'
    echo 'echo "===== the test JVM exited with status $rc ====="'
    if ((${#EXTRA[@]} == 0)); then
        printf 'echo "===== JUnit: %s ====="\n' "tag unchecked, -Dverbs4j.unchecked=true, a second JVM"
        printf '%q ' "${UNCHECKED[@]}" | sed 's/@CP@/"$CP"/'
        echo
        echo 'urc=$?; echo "===== the unchecked test JVM exited with status $urc ====="; ((rc == 0)) && rc=$urc'
    fi
    echo 'echo "===== rdma res show (after the test JVM) ====="; rdma res show'
    echo 'exit $rc'
} >"$WORK/guest-run.sh"
chmod +x "$WORK/guest-run.sh"

say "guest: softroce/run-in-guest.sh --timeout $TIMEOUT -- ${WORK#"$ROOT/"}/guest-run.sh${VERBS4J_GUEST_KERNEL:+ (kernel $VERBS4J_GUEST_KERNEL)}"
GUEST_START=$SECONDS
grc=0
# single-threaded TCG: multi-threaded TCG crashed test JVMs at freshly patched compiled-code entries
# (cross-modifying code) about one run in four; VERBS4J_GUEST_ACCEL overrides it
VERBS4J_GUEST_ACCEL="${VERBS4J_GUEST_ACCEL:-tcg,thread=single,tb-size=512}" \
    "$ROOT/softroce/run-in-guest.sh" --timeout "$TIMEOUT" --share "$ROOT" -- "bash $WORK/guest-run.sh" 2>&1 || grc=$?
GUEST_SECS=$((SECONDS - GUEST_START))
say "guest finished in ${GUEST_SECS}s with exit status $grc"

# ---------------------------------------------------------------------------------------------
# 3. Report (host).
# ---------------------------------------------------------------------------------------------
# Legacy JUnit XML: one <testsuite tests= skipped= failures= errors=> per engine.
tests=0 skipped=0 failures=0 errors=0 nfiles=0
shopt -s nullglob
for f in "$REPORTS"/TEST-*.xml "$REPORTS"/unchecked/TEST-*.xml; do
    nfiles=$((nfiles + 1))
    head="$(grep -o '<testsuite [^>]*>' "$f" | head -n1)"
    attr() { sed -n "s/.* $1=\"\([0-9]*\)\".*/\1/p" <<<"$head"; }
    tests=$((tests + $(attr tests))) skipped=$((skipped + $(attr skipped)))
    failures=$((failures + $(attr failures))) errors=$((errors + $(attr errors)))
done
failed=$((failures + errors))
passed=$((tests - skipped - failed))
echo "Guest-tier: $passed passed, $failed failed, $skipped skipped"
say "guest tier took $((SECONDS - START))s in all (guest ${GUEST_SECS}s); reports in ${REPORTS#"$ROOT/"}/, console in ${VERBS4J_GUEST_LOG}"

status=0
if [[ $grc != 0 ]]; then
    case $grc in
    124) echo "[guest-tests] FAILED: the guest timed out after ${TIMEOUT}s" >&2 ;;
    125) echo "[guest-tests] FAILED: the guest ended without an exit status (boot failure or panic)" >&2 ;;
    *) echo "[guest-tests] FAILED: the guest command exited with status $grc" >&2 ;;
    esac
    status=1
fi
if ((nfiles == 0)); then
    echo "[guest-tests] FAILED: no JUnit XML report in ${REPORTS#"$ROOT/"}" >&2; status=1
fi
if ((failed > 0)); then
    echo "[guest-tests] FAILED: $failed test(s) failed in the guest" >&2; status=1
fi
if ((passed <= 0)); then
    echo "[guest-tests] FAILED: no test passed in the guest (none ran?)" >&2; status=1
fi
exit $status
