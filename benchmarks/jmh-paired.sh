#!/usr/bin/env bash
# Paired JMH forks for a machine whose speed drifts: two arms (a jar and a benchmark, or two
# benchmarks of one jar) run one short fork at a time, A B A B ..., and each pair's difference
# B - A of the best iteration's ns/op is taken, so that a slow minute falls on both arms of a pair.
# Prints every fork, then per benchmark parameter set the median paired difference and the best of
# each arm. Used in docs/hot-path.md where a whole jmh-overhead.sh run was too noisy (±50%).
#
#   benchmarks/jmh-paired.sh PAIRS ARM_A ARM_B [-- JMH args]
#   ARM = [JAR::]REGEX      (JAR defaults to benchmarks/target/verbs4j-benchmarks.jar)
#
#   # a change: the jar before against the jar after, one benchmark
#   benchmarks/jmh-paired.sh 8 '/tmp/before.jar::PostPollUncheckedBenchmark\.javaPostPrebuilt$' \
#       '/tmp/after.jar::PostPollUncheckedBenchmark\.javaPostPrebuilt$' -- -p chain=1
#   # two benchmarks of one jar
#   benchmarks/jmh-paired.sh 8 'PostPollUncheckedBenchmark\.javaPostPrebuilt$' \
#       'PostPollConfinedUncheckedBenchmark\.javaPostPrebuilt$' -- -p chain=1
#
# Each fork: 3 x 500 ms warm-up, 4 x 500 ms measurement (override with WI, I, W, R), CPU time profiler
# on (org.verbs4j.bench.CpuTimeProfiler) so that a fork's CPU time per op is printed beside its best
# wall-clock iteration.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/java25.sh
PAIRS=${1:?pairs}; A=${2:?arm A}; B=${3:?arm B}; shift 3
[[ "${1:-}" == "--" ]] && shift
WI=${WI:-3}; I=${I:-4}; W=${W:-500ms}; R=${R:-500ms}
DEFAULT_JAR=benchmarks/target/verbs4j-benchmarks.jar
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
if [[ ! -f "$DEFAULT_JAR" ]]; then
    ./mvnw -B -q package -DskipTests -pl benchmarks -am
fi

fork() { # arm label pair
    local arm=$1 label=$2 pair=$3 jar regex
    shift 3
    if [[ "$arm" == *::* ]]; then jar=${arm%%::*}; regex=${arm#*::}; else jar=$DEFAULT_JAR; regex=$arm; fi
    java -Djmh.ignoreLock=true -jar "$jar" "$regex" -f 1 -wi "$WI" -i "$I" -w "$W" -r "$R" \
        -prof org.verbs4j.bench.CpuTimeProfiler -rf json -rff "$OUT/$label$pair.json" "$@" > "$OUT/$label$pair.log" 2>&1 \
        || { echo "fork $label$pair failed:"; tail -20 "$OUT/$label$pair.log"; exit 1; }
}

for p in $(seq 1 "$PAIRS"); do
    fork "$A" A "$p" "$@"
    fork "$B" B "$p" "$@"
done

python3 - "$OUT" "$PAIRS" "$A" "$B" <<'PY'
import json, statistics, sys, pathlib
out, pairs, arms = pathlib.Path(sys.argv[1]), int(sys.argv[2]), {"A": sys.argv[3], "B": sys.argv[4]}
def runs(label, p):
    res = {}
    for r in json.load(open(out / f"{label}{p}.json")):
        key = r["benchmark"].split(".")[-2] + "." + r["benchmark"].split(".")[-1] + " " + \
            ",".join(f"{k}={v}" for k, v in sorted(r.get("params", {}).items()))
        best = min(x for fork in r["primaryMetric"]["rawData"] for x in fork)
        cpu = next((v["score"] for k, v in r.get("secondaryMetrics", {}).items() if k.endswith("cpu.time.norm")), float("nan"))
        res[key] = (best, cpu)
    return res
data = {(l, p): runs(l, p) for l in "AB" for p in range(1, pairs + 1)}
print(f"A = {arms['A']}\nB = {arms['B']}\n")
print("pair | arm | benchmark | best iteration ns/op | CPU time ns/op")
for p in range(1, pairs + 1):
    for l in "AB":
        for k, (best, cpu) in sorted(data[(l, p)].items()):
            print(f"{p} | {l} | {k} | {best:.2f} | {cpu:.2f}")
print()
a_keys = sorted(data[("A", 1)])
b_keys = sorted(data[("B", 1)])
for ka, kb in zip(a_keys, b_keys):
    A = [data[("A", p)][ka][0] for p in range(1, pairs + 1)]
    B = [data[("B", p)][kb][0] for p in range(1, pairs + 1)]
    d = [b - a for a, b in zip(A, B)]
    q = [b / a for a, b in zip(A, B)]
    print(f"{ka} -> {kb}: B - A per pair " + " ".join(f"{x:+.1f}" for x in d)
          + f"; median {statistics.median(d):+.2f} ns, median B/A {statistics.median(q):.3f};"
          + f" best A {min(A):.2f}, best B {min(B):.2f}")
PY
