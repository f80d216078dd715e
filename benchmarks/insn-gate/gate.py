#!/usr/bin/env python3
"""gate.py: benchmarks/insn-gate.sh's verdict on the counted runs.

  gate.py --runs RUNS.json [RUNS.json ...] --baseline BASELINE.json --result RESULT.json --command "..."
          [--update-baseline]

RUNS.json: softroce/tcg-insn-report.py --ops --json's rows (one per measured run of pair pt-pt, perftest's
client, or vp-pt, verbs-perf's client, both against perftest's server). A run's figure is the most
frequent count of user instructions between two posts: every operation of a loop runs the same
instructions, and the plugin's opdelay has the answer waiting for the poll, so most operations count the
same exactly, while a compile, a timer or another thread on the vCPU adds to a few (in write_bw, the one
post in 100 that also polls its CQ moderation period's completion counts apart). A tool's figure is the
lowest over its runs: a JVM's JIT still improves its code over the first runs, and nothing but a change
of the code makes the count of an operation lower. With several RUNS files (boots), a tool's figure is
the highest of the boots' figures: how a baseline is made from boots whose JITs compiled differently.

The gate fails when, for any test, verbs-perf's figure exceeds the baseline's by more than the tolerance,
or the ratio verbs-perf / perftest exceeds the baseline's ratio by more than the tolerance, or a figure is
missing. With --update-baseline it writes BASELINE.json from this run instead (and passes).
Exit status: 0 pass, 1 fail, 2 usage or unreadable input.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

TOOLS = {"vp-pt": "verbs_perf", "pt-pt": "perftest"}
DEFAULT_TOLERANCE = 0.05


def statistic(test):
    return "mode"


def figures(boots):
    """{"TEST SIZE": {"verbs_perf": x, "perftest": y, "runs": [...]}} from the report's rows, one list per boot"""
    by = {}
    for b, runs in enumerate(boots):
        for r in runs:
            tool = TOOLS.get(r["pair"])
            if tool is None:
                continue
            key = f"{r['test']} {r['size']}"
            v = r.get(statistic(r["test"]))
            by.setdefault(key, {}).setdefault(tool, [[] for _ in boots])[b].append(v)
    out = {}
    for key, tools in sorted(by.items()):
        row = {"statistic": statistic(key.split()[0]), "runs": tools}
        for tool, per_boot in tools.items():
            lows = [min(v for v in vals if v is not None) for vals in per_boot if any(v is not None for v in vals)]
            row[tool] = max(lows) if len(lows) == len(boots) else None
        out[key] = row
    return out


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        qemu = "?"
    return {"host": platform.node(), "cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(), "qemu": qemu}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", required=True, nargs="+")
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--opdelay", type=int)
    ap.add_argument("--update-baseline", action="store_true")
    a = ap.parse_args()
    try:
        boots = [json.load(open(f)) for f in a.runs]
    except (OSError, ValueError) as e:
        print(f"insn-gate: no counted runs ({e})", file=sys.stderr)
        return 2
    if len(boots) > 1 and not a.update_baseline:
        ap.error("several --runs files make a baseline (--update-baseline); a verdict judges one boot")
    rows = figures(boots)
    base = None
    if os.path.exists(a.baseline):
        base = json.load(open(a.baseline))
    tol = (base or {}).get("tolerance", DEFAULT_TOLERANCE)
    brows = (base or {}).get("rows", {})
    keys = sorted(set(rows) | set(brows))
    fail = []
    table = []
    for key in keys:
        r = rows.get(key, {})
        b = brows.get(key, {})
        vp, pt = r.get("verbs_perf"), r.get("perftest")
        ratio = round(vp / pt, 3) if vp and pt else None
        verdict = "ok"
        if vp is None or pt is None:
            verdict = "FAIL: no count"
        elif a.update_baseline:
            verdict = "baseline"
        elif not b:
            verdict = "FAIL: not in the baseline"
        else:
            why = []
            if vp > b["verbs_perf"] * (1 + tol):
                why.append(f"verbs-perf +{100 * (vp / b['verbs_perf'] - 1):.1f}%")
            if ratio > b["ratio"] * (1 + tol):
                why.append(f"ratio +{100 * (ratio / b['ratio'] - 1):.1f}%")
            if why:
                verdict = "FAIL: " + ", ".join(why)
            elif vp != b["verbs_perf"]:
                verdict = f"ok (verbs-perf {100 * (vp / b['verbs_perf'] - 1):+.1f}%)"
        if verdict.startswith("FAIL"):
            fail.append(key)
        table.append({"test": key.split()[0], "size": int(key.split()[1]), "statistic": r.get("statistic"),
                      "verbs_perf": vp, "perftest": pt, "ratio": ratio,
                      "baseline_verbs_perf": b.get("verbs_perf"), "baseline_ratio": b.get("ratio"),
                      "verdict": verdict, "runs": r.get("runs", {})})
    print(f"insn-gate: user-mode instructions per operation on the client's vCPU (tolerance {100 * tol:.1f}%)")
    print(f"{'test':14} {'verbs-perf':>11} {'perftest':>9} {'ratio':>7} {'baseline':>9} {'b.ratio':>8}  verdict")
    for t in table:
        f = lambda v, w, p=1: f"{v:{w}.{p}f}" if v is not None else f"{'-':>{w}}"
        print(f"{t['test'] + ' ' + str(t['size']):14} {f(t['verbs_perf'], 11)} {f(t['perftest'], 9)} "
              f"{f(t['ratio'], 7, 3)} {f(t['baseline_verbs_perf'], 9)} {f(t['baseline_ratio'], 8, 3)}  {t['verdict']}")
    passed = not fail
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "command": a.command, "tolerance": tol, "opdelay_us": a.opdelay,
              "baseline": a.baseline, "pass": passed, "rows": table}
    os.makedirs(os.path.dirname(os.path.abspath(a.result)), exist_ok=True)
    with open(a.result, "w") as f:
        json.dump(result, f, indent=1)
    if a.update_baseline:
        if not passed:
            print("insn-gate: a count is missing: baseline not written", file=sys.stderr)
            return 1
        new = {"tolerance": tol, "opdelay_us": a.opdelay,
               "measured": {"date": result["date"], "machine": result["machine"], "command": a.command},
               "rows": {f"{t['test']} {t['size']}": {"verbs_perf": t["verbs_perf"], "perftest": t["perftest"],
                                                     "ratio": t["ratio"]} for t in table}}
        with open(a.baseline, "w") as f:
            json.dump(new, f, indent=1)
            f.write("\n")
        print(f"insn-gate: baseline written to {a.baseline}")
        return 0
    print(f"insn-gate: {'PASS' if passed else 'FAIL (' + ', '.join(fail) + ')'}; result in {a.result}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
