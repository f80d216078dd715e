#!/usr/bin/env python3
"""Renders docs/results.md, the latest measured results, from the files the benchmark commands write.

    python3 benchmarks/results.py                  # write docs/results.md from the default inputs
    python3 benchmarks/results.py --out -          # print it instead
    python3 benchmarks/results.py stamp PATH --command "CMD"
                                                   # record date, machine and command of a result

Inputs, each optional (a missing one gives a section that names the command that measures it):

    --jmh FILE    JMH's JSON (-rf json) of benchmarks/jmh-overhead.sh
                  (default benchmarks/target/jmh-overhead.json)
    --gate FILE   the instruction-count gate's result (default target/insn-gate/result.json):
                  {date, machine, command, rows: [{test, size, verbs_perf, perftest, ratio,
                  baseline_verbs_perf, baseline_ratio, verdict}]}
    --noise DIR   the output folder of the noise pass (default target/perf-noise): compare.txt (the
                  report of `PerfCompare DIR`, kept by perftest-compare.sh) and conditions.txt (written by
                  perftest-compare.sh)

Date, machine and command of the JMH run and of the noise pass come from a stamp beside them
(FILE.meta.json, DIR/meta.json) that `stamp` writes; the gate's result carries its own. The output
depends on the inputs only (no clock, no network), so regenerating from the same files gives the
same document.
"""
import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JMH = "benchmarks/target/jmh-overhead.json"
DEFAULT_GATE = "target/insn-gate/result.json"
DEFAULT_NOISE = "target/perf-noise"

JMH_COMMAND = "WI=4 I=6 W=1s R=1s benchmarks/jmh-overhead.sh --build"
GATE_COMMAND = "benchmarks/insn-gate.sh"
NOISE_COMMAND = "benchmarks/noise-pass.sh"

CK, UN = "PostPollBenchmark", "PostPollUncheckedBenchmark"
FC, FU = "PostPollConfinedBenchmark", "PostPollConfinedUncheckedBenchmark"


# ---------------------------------------------------------------- stamps

def machine_description():
    """This machine in one line: CPU model, CPU count, kernel, load average."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    try:
        load = ", load average %.1f at the end" % os.getloadavg()[0]
    except OSError:
        pass
    return "%s, %d CPUs, %s %s%s" % (model, os.cpu_count() or 0, platform.system(), platform.release(), load)


def stamp_path(path):
    p = Path(path)
    return p / "meta.json" if p.is_dir() else p.with_name(p.name + ".meta.json")


def write_stamp(path, command):
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(),
        "command": command,
    }
    target = stamp_path(path)
    target.write_text(json.dumps(meta, indent=2) + "\n")
    return target


def read_stamp(path, fallback_date_of=None):
    """The stamp beside a result; without one, the date is the result file's time, if given."""
    try:
        meta = json.loads(stamp_path(path).read_text())
        if isinstance(meta, dict):
            return meta
    except (OSError, ValueError):
        pass
    if fallback_date_of is None:
        return {}
    t = datetime.datetime.fromtimestamp(Path(fallback_date_of).stat().st_mtime, datetime.timezone.utc)
    return {"date": t.strftime("%Y-%m-%d %H:%M UTC") + " (the file's time; no stamp beside it)"}


def shown(path):
    """A path as the document shows it: relative to the repository when inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def machine_text(m):
    """A machine as one line: a stamp's string as it is, the gate's record as 'key value' pairs."""
    if isinstance(m, dict):
        return ", ".join("%s %s" % (k, v) for k, v in m.items())
    return str(m)


def provenance(meta, source):
    """The 'where from' lines of a section."""
    return [
        "- date: %s" % meta.get("date", "not recorded"),
        "- machine: %s" % machine_text(meta.get("machine", "not recorded")),
        "- command: `%s`" % meta["command"] if meta.get("command") else "- command: not recorded",
        "- source: `%s`" % shown(source),
    ]


def not_measured(command):
    return ["Not yet measured on this machine: run `%s`, then `python3 benchmarks/results.py`." % command]


# ---------------------------------------------------------------- JMH

def jmh_scores(rows):
    """{(class, method, chain): (ns/op, max B/op or None)} of a JMH JSON result list."""
    res = {}
    for r in rows:
        parts = r["benchmark"].rsplit(".", 2)
        cls, method = parts[-2], parts[-1]
        chain = str(r.get("params", {}).get("chain", "-"))
        score = r["primaryMetric"]["score"]
        norm = None
        for key, v in r.get("secondaryMetrics", {}).items():
            if key.endswith("gc.alloc.rate.norm"):
                norm = v["score"]
        res[(cls, method, chain)] = (score, norm)
    return res


def fmt_ns(v):
    return "-" if v is None else "%.1f" % v[0]


def fmt_ratio(a, b):
    return "-" if a is None or b is None or b[0] == 0 else "%.2f×" % (a[0] / b[0])


def jmh_section(path):
    out = ["## The data path: Java against C (JMH, stand-in provider)", ""]
    try:
        rows = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return out + not_measured(JMH_COMMAND)
    res = jmh_scores(rows)
    units = {r["primaryMetric"].get("scoreUnit", "") for r in rows}
    out += provenance(read_stamp(path, path), path)
    out += [
        "",
        "ns per post+poll of one chain of RDMA_WRITEs (the last signaled), JMH's mean (%s); "
        "C = `cLoop` (the same loop in C), floor = `rawCritical` (hand-placed stores and the two "
        "critical downcalls, no checks); bulk = one `SendWorkRequests.writes(n, …)` call."
        % ", ".join(sorted(u for u in units if u)),
        "",
        "| chain | C | floor | floor ÷ C | per request, checked | unchecked | bulk, checked | bulk, unchecked "
        "| bulk unchecked ÷ C | max B/op |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    chains = sorted({k[2] for k in res if k[0] == CK and k[2] != "-"}, key=lambda c: int(c) if c.isdigit() else 0)
    for c in chains:
        cl, fl = res.get((CK, "cLoop", c)), res.get((CK, "rawCritical", c))
        pc, pu = res.get((CK, "javaPublicApi", c)), res.get((UN, "javaPublicApi", c))
        bc, bu = res.get((CK, "javaBulkApi", c)), res.get((UN, "javaBulkApi", c))
        norms = [v[1] for v in (cl, fl, pc, pu, bc, bu) if v is not None and v[1] is not None]
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c, fmt_ns(cl), fmt_ns(fl), fmt_ratio(fl, cl), fmt_ns(pc), fmt_ns(pu), fmt_ns(bc), fmt_ns(bu),
            fmt_ratio(bu, cl), "%.3f" % max(norms) if norms else "-"))
    one = [("default CQ, unchecked", res.get((UN, "javaPublicApi", "1"))),
           ("confined CQ, unchecked", res.get((FU, "javaPublicApi", "1"))),
           ("default CQ, checked", res.get((CK, "javaPublicApi", "1"))),
           ("confined CQ, checked", res.get((FC, "javaPublicApi", "1")))]
    floor = res.get((CK, "rawCritical", "1"))
    if floor is not None and any(v is not None for _, v in one):
        out += ["", "One WR built per post, against the floor (%s ns):" % fmt_ns(floor), ""]
        out += ["- %s: %s ns, %s" % (what, fmt_ns(v), fmt_ratio(v, floor)) for what, v in one if v is not None]
    return out


# ---------------------------------------------------------------- the instruction-count gate

def cell(v):
    if isinstance(v, float):
        return "%.3f" % v if abs(v) < 10 else "%.0f" % v
    if isinstance(v, dict):
        return ", ".join("%s %s" % (k, cell(x)) for k, x in v.items())
    return "-" if v is None else str(v)


def gate_section(path):
    out = ["## Instructions per operation (the CI gate, TCG guest)", ""]
    try:
        result = json.loads(Path(path).read_text())
        rows = result["rows"]
    except (OSError, ValueError, KeyError, TypeError):
        return out + not_measured(GATE_COMMAND)
    out += provenance(result, path)
    out += [
        "",
        "User-mode instructions per operation on the client's vCPU, verbs-perf beside perftest in one "
        "boot; the gate fails when verbs-perf's count or its ratio to perftest grows past the committed "
        "baseline.",
        "",
        "| test | verbs-perf insns/op | perftest insns/op | ratio | baseline insns/op | baseline ratio | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        test = "%s %s B" % (r.get("test"), r["size"]) if r.get("size") is not None else r.get("test")
        out.append("| %s |" % " | ".join([cell(test)] + [cell(r.get(k)) for k in
                   ("verbs_perf", "perftest", "ratio", "baseline_verbs_perf", "baseline_ratio", "verdict")]))
    return out


# ---------------------------------------------------------------- the noise pass

REPORT_STARTS = ("Each pair ran", "Ratio table")


def noise_section(folder):
    out = ["## verbs-perf against perftest 4.5 (the noise pass, TCG guest)", ""]
    d = Path(folder)
    report = d / "compare.txt"
    if not report.is_file():
        if d.is_dir() and any(d.glob("*__*.out")):
            return out + ["`%s` holds a pass without its report: run `verbs-perf compare %s > %s`, then "
                          "`python3 benchmarks/results.py`." % ((shown(folder),) * 2 + (shown(report),))]
        return out + not_measured(NOISE_COMMAND)
    lines = report.read_text().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(REPORT_STARTS)), 0)
    body = [l for l in lines[start:] if not l.startswith("plots: ")]
    out += provenance(read_stamp(folder, report), folder)
    conditions = d / "conditions.txt"
    if conditions.is_file():
        out += ["", "Conditions, as perftest-compare.sh wrote them:", "", "```"]
        out += [l.rstrip() for l in conditions.read_text().splitlines() if l.strip()] + ["```"]
    summary = [l.strip() for l in body if l.startswith(("Within perftest's own noise", "Direction:", "Outside the band:"))]
    if summary:
        out += ["", "Summary:", ""] + ["- %s" % l for l in summary]
    out += ["", "The report of `verbs-perf compare`:", "", "```"] + body + ["```"]
    return out


# ---------------------------------------------------------------- the document

HEADER = [
    "# Measured results",
    "",
    "Generated by `python3 benchmarks/results.py` from the result files the benchmark commands write "
    "under `target/`; do not edit by hand. What the figures mean and how to reproduce each one: "
    "[benchmarking.md](benchmarking.md) (verbs-perf against perftest, the instruction counts) and "
    "[hot-path.md](hot-path.md) (the data path against C).",
]


def render(jmh, gate, noise):
    lines = HEADER[:]
    for section in (jmh_section(jmh), gate_section(gate), noise_section(noise)):
        lines += [""] + section
    return "\n".join(lines) + "\n"


def main(argv):
    if argv[:1] == ["stamp"]:
        p = argparse.ArgumentParser(prog="results.py stamp")
        p.add_argument("path")
        p.add_argument("--command", required=True)
        a = p.parse_args(argv[1:])
        print("results.py: wrote %s" % write_stamp(a.path, a.command), file=sys.stderr)
        return 0
    p = argparse.ArgumentParser(prog="results.py", description="Renders docs/results.md from result files.")
    p.add_argument("--jmh", default=str(ROOT / DEFAULT_JMH))
    p.add_argument("--gate", default=str(ROOT / DEFAULT_GATE))
    p.add_argument("--noise", default=str(ROOT / DEFAULT_NOISE))
    p.add_argument("--out", default=str(ROOT / "docs/results.md"), help="the file to write, - for stdout")
    a = p.parse_args(argv)
    text = render(a.jmh, a.gate, a.noise)
    if a.out == "-":
        sys.stdout.write(text)
    else:
        Path(a.out).write_text(text)
        print("results.py: wrote %s" % shown(a.out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
