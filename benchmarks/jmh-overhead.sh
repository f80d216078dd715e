#!/usr/bin/env bash
# The binding-overhead set in ONE JMH run (one `java -jar`, one fork per benchmark
# class and parameter), then a ratio table: Java public API / C loop per chain length (checked
# and unchecked; the chain built per request and with the bulk SendWorkRequests.writes), one WR /
# the raw two-downcall floor, the build/post ablation, the default CQ against one confined to the
# benchmark thread (its poll passes no gate), completion
# decoding of 32, and the gc profiler's B/op for every row.
#
#   benchmarks/jmh-overhead.sh            # build the jar if missing, run, print the tables
#   benchmarks/jmh-overhead.sh --build    # rebuild first (./mvnw package, never install)
#   WI=4 I=6 W=1s R=1s benchmarks/jmh-overhead.sh    # a quiet machine: longer iterations
#   benchmarks/jmh-overhead.sh --table results.json  # only print the tables of an earlier run
#   STAT=cpu benchmarks/jmh-overhead.sh   # tables from CPU time per op (a busy machine, see below)
#   JAR=/tmp/other.jar benchmarks/jmh-overhead.sh     # run another build (before/after back to back)
#   benchmarks/jmh-overhead.sh --compare before.json after.json   # every benchmark of two runs side by side
#
# Which figure the tables show (STAT): `mean` (default; JMH's score: wall-clock ns/op, ± its 99.9%
# error), `cpu` (cpu.time.norm of org.verbs4j.bench.CpuTimeProfiler: the benchmark thread's CPU
# time per op, ± its error; on a shared, over-subscribed machine the wall clock also counts the
# time spent waiting for a core, the CPU time does not) or `min` (the best iteration's wall-clock
# ns/op). On a quiet machine use the default; both figures are in the JSON either way.
#
# Extra arguments after `--` go to JMH (e.g. -- -prof stack).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/java25.sh
JAR=${JAR:-benchmarks/target/verbs4j-benchmarks.jar}
OUT=${OUT:-benchmarks/target/jmh-overhead.json}
WI=${WI:-3}; I=${I:-5}; W=${W:-1s}; R=${R:-1s}

table() {
STAT=${STAT:-mean} python3 - "$1" <<'PY'
import json, os, sys
rows = json.load(open(sys.argv[1]))
STAT = os.environ.get("STAT", "mean")
res = {}
for r in rows:
    name = r["benchmark"].rsplit(".", 2)
    cls, m = name[-2], name[-1]
    chain = r.get("params", {}).get("chain", "-")
    pm = r["primaryMetric"]
    sec = r.get("secondaryMetrics", {})
    norm = next((v["score"] for k, v in sec.items() if k.endswith("gc.alloc.rate.norm")), None)
    cpu = next((v for k, v in sec.items() if k.endswith("cpu.time.norm")), None)
    if STAT == "cpu" and cpu:
        score, err = cpu["score"], cpu["scoreError"]
    elif STAT == "min":
        score, err = min(x for fork in pm.get("rawData", [[pm["score"]]]) for x in fork), None
    else:
        score, err = pm["score"], pm["scoreError"]
    res[(cls, m, chain)] = (score, err, norm)

def g(cls, m, c):
    return res.get((cls, m, c))
def fmt(v):
    if v is None: return "-"
    s, e, _ = v
    try:
        e = float(e)
    except (TypeError, ValueError):
        e = float("nan")
    return f"{s:.2f} ± {e:.2f}" if e == e else f"{s:.2f}"
def val(v):
    return v[0]
WHAT = {"mean": "wall-clock mean ± 99.9% error", "cpu": "CPU time of the benchmark thread per op ± 99.9% error",
        "min": "best iteration, wall clock"}[STAT]
def ratio(a, b):
    return f"{val(a) / val(b):.2f}×" if a and b else "-"
def bop(*vs):
    xs = [v[2] for v in vs if v and v[2] is not None]
    return f"{max(xs):.3f}" if xs else "-"

CK, UN = "PostPollBenchmark", "PostPollUncheckedBenchmark"
chains = sorted({k[2] for k in res if k[0] in (CK, UN)}, key=lambda c: int(c) if c.isdigit() else 0)
print("ns per post+poll of one chain (RDMA_WRITE, 64-byte SGE each, last signaled), " + WHAT + ";")
print("B/op = gc.alloc.rate.norm (the largest of the row)")
print()
def ratios(method, what):
    print("| chain | C loop | raw floor | " + what + " checked | ÷ C | " + what + " unchecked | ÷ C | checked ÷ floor "
          "| unchecked ÷ floor | max B/op |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in chains:
        cl, fl, ck, un = g(CK, "cLoop", c), g(CK, "rawCritical", c), g(CK, method, c), g(UN, method, c)
        print(f"| {c} | {fmt(cl)} | {fmt(fl)} | {fmt(ck)} | {ratio(ck, cl)} | {fmt(un)} | {ratio(un, cl)} "
              f"| {ratio(ck, fl)} | {ratio(un, fl)} | {bop(ck, un, fl)} |")
ratios("javaPublicApi", "per request")
if any(k[1] == "javaBulkApi" for k in res):
    print()
    print("The same chain built with ONE bulk call, SendWorkRequests.writes(n, ...) (javaBulkApi), ns, " + WHAT)
    print()
    ratios("javaBulkApi", "bulk")
print()
print("Ablation: where the Java time goes (ns, " + WHAT + "; build = public API - prebuilt post+poll of the same chain)")
print()
print("| chain | raw fill (floor - raw prebuilt) | raw prebuilt post+poll | checked prebuilt | checked build | unchecked prebuilt | unchecked build |")
print("|---|---|---|---|---|---|---|")
for c in chains:
    fl, rp = g(CK, "rawCritical", c), g(CK, "rawPostPrebuilt", c)
    ck, ckp, un, unp = g(CK, "javaPublicApi", c), g(CK, "javaPostPrebuilt", c), g(UN, "javaPublicApi", c), g(UN, "javaPostPrebuilt", c)
    d = lambda a, b: f"{val(a) - val(b):.2f}" if a and b else "-"
    print(f"| {c} | {d(fl, rp)} | {fmt(rp)} | {fmt(ckp)} | {d(ck, ckp)} | {fmt(unp)} | {d(un, unp)} |")
FC, FU = "PostPollConfinedBenchmark", "PostPollConfinedUncheckedBenchmark"
if any(k[0] in (FC, FU) for k in res):
    print()
    print("A completion queue confined to the benchmark thread (createConfinedCompletionQueue: the poll checks the")
    print("thread instead of entering a gate), against the default CQ, ns, " + WHAT + "; ÷ floor = ÷ the raw two-downcall floor")
    print()
    print("| chain | mode | public API, default CQ | confined CQ | ÷ floor, default / confined | prebuilt post+poll, default CQ | confined CQ |")
    print("|---|---|---|---|---|---|---|")
    for c in chains:
        fl = g(CK, "rawCritical", c)
        for mode, base, conf in (("checked", CK, FC), ("unchecked", UN, FU)):
            a, b = g(base, "javaPublicApi", c), g(conf, "javaPublicApi", c)
            print(f"| {c} | {mode} | {fmt(a)} | {fmt(b)} | {ratio(a, fl)} / {ratio(b, fl)} "
                  f"| {fmt(g(base, 'javaPostPrebuilt', c))} | {fmt(g(conf, 'javaPostPrebuilt', c))} |")
DC, DU = "CompletionDecodeBenchmark", "CompletionDecodeUncheckedBenchmark"
if any(k[0] in (DC, DU) for k in res):
    print()
    print("Completion decoding: ns per 32 completions (wr_id, status, opcode, byte_len, qp_num of each), " + WHAT)
    print()
    print("| | checked | unchecked | B/op |")
    print("|---|---|---|---|")
    for m, what in [("decode32", "read through WorkCompletions"), ("decode32Raw", "raw gets (floor)"),
                    ("postPollDecode32", "post 32 signaled + one poll + read, public API"),
                    ("rawPostPollDecode32", "the same, raw downcalls + raw gets (floor)")]:
        a, b = g(DC, m, "-"), g(DU, m, "-")
        print(f"| {what} (`{m}`) | {fmt(a)} | {fmt(b)} | {bop(a, b)} |")
PY
}

compare() {
STAT=${STAT:-mean} python3 - "$1" "$2" <<'PY'
import json, os, sys
STAT = os.environ.get("STAT", "mean")
def load(f):
    out = {}
    for r in json.load(open(f)):
        sec = r.get("secondaryMetrics", {})
        cpu = next((v for k, v in sec.items() if k.endswith("cpu.time.norm")), None)
        m = cpu if STAT == "cpu" and cpu else r["primaryMetric"]
        key = r["benchmark"].rsplit(".", 2)[-2] + "." + r["benchmark"].rsplit(".", 1)[-1]
        out[(key, r.get("params", {}).get("chain", "-"))] = (m["score"], m["scoreError"])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
print(f"ns/op ({'CPU time of the benchmark thread' if STAT == 'cpu' else 'wall clock'}, ± 99.9% error): "
      f"{sys.argv[1]} -> {sys.argv[2]}")
print()
print("| benchmark | chain | before | after | change |")
print("|---|---|---|---|---|")
def f(v):
    try:
        return f"{v[0]:.2f} ± {float(v[1]):.2f}"
    except (TypeError, ValueError):
        return f"{v[0]:.2f}"
for k in sorted(a, key=lambda k: (k[0], int(k[1]) if k[1].isdigit() else 0)):
    if k in b:
        print(f"| {k[0]} | {k[1]} | {f(a[k])} | {f(b[k])} | {100 * (b[k][0] / a[k][0] - 1):+.1f}% |")
PY
}

if [[ "${1:-}" == "--compare" ]]; then
    compare "$2" "$3"
    exit 0
fi
if [[ "${1:-}" == "--table" ]]; then
    table "$2"
    exit 0
fi
if [[ "${1:-}" == "--build" || ! -f "$JAR" ]]; then
    ./mvnw -B -q package -DskipTests -pl benchmarks -am
fi
[[ "${1:-}" == "--build" ]] && shift
[[ "${1:-}" == "--" ]] && shift
# -Djmh.ignoreLock: other JMH runs may hold /tmp/jmh.lock on a shared machine (their load is noise)
java -Djmh.ignoreLock=true -jar "$JAR" \
    'PostPollBenchmark\.(cLoop|rawCritical|rawPostPrebuilt|javaPublicApi|javaBulkApi|javaPostPrebuilt)$' \
    'PostPollUncheckedBenchmark\.(javaPublicApi|javaBulkApi|javaPostPrebuilt)$' \
    'PostPollConfined(Unchecked)?Benchmark\.(javaPublicApi|javaPostPrebuilt)$' \
    'CompletionDecode(Unchecked)?Benchmark\.' \
    -p chain=1,8,32 -f 1 -wi "$WI" -i "$I" -w "$W" -r "$R" -prof gc -prof org.verbs4j.bench.CpuTimeProfiler -rf json -rff "$OUT" "$@"
# date, machine and command beside the JSON, for docs/results.md (benchmarks/results.py)
python3 benchmarks/results.py stamp "$OUT" --command "WI=$WI I=$I W=$W R=$R benchmarks/jmh-overhead.sh${*:+ -- $*}"
echo
table "$OUT"
