#!/usr/bin/env python3
"""tcg-insn-report.py: instructions per run from tcg-insn-plugin.c's counts, beside perftest-compare.sh's marks.

  tcg-insn-report.py --console STAMPED --totals TOTALS [--hist HIST] [--heavy HEAVY] [--maps FILE ...]
                     [--codelist FILE ...] [--perfmap FILE ...] [--counters DIR] [--window 0.3:0.8]
                     [--top 8] [--per-syscall]
  tcg-insn-report.py --console STAMPED --ops OPS [--window 0.2:0.9] [--json FILE]

STAMPED: the guest console through `tcg-sampler.py stamp`, with perftest-compare.sh's
VERBS4J_PERF_MARKS lines; TOTALS and HIST: the plugin's files (totals=, hist=); --maps: copies of
/proc/PID/maps of the processes whose code HIST should name (a library, or the JVM's anonymous
code); --codelist: `jcmd PID Compiler.codelist` outputs, to name the JIT's methods; --perfmap:
the JVM's /tmp/perf-PID.map as -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit writes it when
the JVM exits (names the methods without a jcmd during the runs); HEAVY: the plugin's heavy= file
(locked instructions, fences, pause, rdtsc, syscall per vCPU and mode); --per-syscall: print the
window's figures per system call of vCPU 0's user mode instead of per second and per kernel
instruction: one operation each in a latency test (one post per operation, and rxe's post_send
rings the kernel with one write(); its post_recv and poll_cq make none); --counters:
perftest-compare.sh's OUT, for each run's sent packets (rxe's hw_counters), so that the whole run's
kernel instructions on vCPU 0 are also printed per packet.

--ops: the plugin's ops= records (one per user-mode system call of the client's vCPU, each with the
user and kernel instructions since the previous one and the call's address). For every measured run:
in its window, the post's call (on rxe a write(2) of ~10,000 kernel instructions or more: of the calls
followed by 4,000 or more, the address that makes most) delimits the operations, and an operation's
user instructions are all those between two posts (another thread's on the same vCPU included). Of
those: the median, the minimum, the most frequent value and its share, the mean of those at most 1.5
times the median, and the median block of 100 operations' mean; --json writes them for
benchmarks/insn-gate.sh.

For every measured (not warm) run of every pair: vCPU 0's kernel and user instructions per second
over the middle of the run (--window, fractions of the time between its marks: the loop, not the
set-up), their ratio, and the regions HIST puts vCPU 0's user instructions in over that window.
"""
import argparse
import bisect
import collections
import json
import re
import sys

MARK = re.compile(r"([\d.]+) \[perftest-compare \+\d+s\] mark (start|end) (\S+) (.*)")
CODE = re.compile(r"\d+ (\d) \d+ (\S+) \[0x([0-9a-f]+), 0x([0-9a-f]+) - 0x([0-9a-f]+)\]")


def load_hist(path):
    dumps, cur = [], None
    for line in open(path):
        if line.startswith("T "):
            cur = (float(line.split()[1]), {})
            dumps.append(cur)
        elif cur is not None:
            a, b = line.split()
            cur[1][int(a, 16)] = int(b)
    return dumps


def namer(maps_files, codelists, perfmaps=()):
    spans = []
    for f in maps_files:
        for line in open(f):
            p = line.split()
            a, b = (int(x, 16) for x in p[0].split("-"))
            path = p[5] if len(p) > 5 else "[anon]"
            spans.append((a, b, path.rsplit("/", 1)[-1] + (" " + p[1] if path == "[anon]" else "")))
    code = []
    for f in codelists:
        for line in open(f):
            m = CODE.search(line)
            if m:
                code.append((int(m.group(3), 16), int(m.group(5), 16), f"{m.group(2)} (tier {m.group(1)})"))
    for f in perfmaps:
        for line in open(f):
            p = line.rstrip("\n").split(" ", 2)
            if len(p) == 3:
                a = int(p[0], 16)
                code.append((a, a + int(p[1], 16), p[2]))
    code.sort()
    starts = [c[0] for c in code]

    def name(addr, size):
        i = bisect.bisect_right(starts, addr + size - 1) - 1
        while i >= 0 and code[i][1] > addr:   # a JIT method overlapping the region
            if code[i][0] < addr + size:
                return code[i][2]
            i -= 1
        for a, b, n in spans:
            if a <= addr < b:
                return n
        return "?"
    return name


def marked_runs(console):
    """(pair, run, start, end) of every run perftest-compare.sh marked in the stamped console"""
    starts, runs = {}, []
    for line in open(console, errors="replace"):
        m = MARK.match(line)
        if m:
            t, what, pair, run = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
            if what == "start":
                starts[(pair, run)] = t
            elif (pair, run) in starts:
                runs.append((pair, run, starts[(pair, run)], t))
    return runs


def op_stats(console, ops, window):
    """per measured run: its window's per-operation user-instruction figures (see --ops)"""
    w0, w1 = window
    recs = []
    for line in open(ops):
        if not line.startswith("#"):
            p = line.split()
            recs.append((float(p[0]), int(p[1]), int(p[2]), p[3] if len(p) > 3 else "-"))
    recs.sort()
    times = [r[0] for r in recs]
    # the kernel instructions that follow a call: those of the next record
    heavy = {i for i in range(len(recs) - 1) if recs[i + 1][2] >= 4000}
    rows = []
    for pair, run, t0, t1 in marked_runs(console):
        if run.endswith("warm"):
            continue
        ta, tb = t0 + w0 * (t1 - t0), t0 + w1 * (t1 - t0)
        i0, i1 = bisect.bisect_left(times, ta), bisect.bisect_right(times, tb)
        sites = collections.Counter(recs[i][3] for i in range(i0, i1) if i in heavy)
        post = sites.most_common(1)[0][0] if sites else None
        sel, acc, started = [], [0, 0], False
        for t, u, k, site in recs[i0:i1]:
            acc[0] += u
            acc[1] += k
            if site == post:
                if started:
                    sel.append((t, acc[0], acc[1]))
                started, acc = True, [0, 0]
        row = {"pair": pair, "run": run, "test": run.split()[0], "size": int(run.split()[1]), "ops": len(sel),
               "calls": i1 - i0, "post_site": post}
        if sel:
            user = sorted(r[1] for r in sel)
            med = user[len(user) // 2]
            typical = [u for u in user if u <= 1.5 * med]
            mode, count = collections.Counter(user).most_common(1)[0]
            # in time order, blocks of 100 operations (a bandwidth loop's CQ moderation period): the
            # median block's mean, a per-operation figure that carries the poll of every 100th post
            blocks = sorted(sum(r[1] for r in sel[i:i + 100]) / 100 for i in range(0, len(sel) - 99, 100))
            row.update(median=med, min=user[0], mode=mode, mode_share=round(count / len(user), 3),
                       mean=round(sum(typical) / len(typical), 1), kept=len(typical),
                       block100=round(blocks[len(blocks) // 2], 1) if blocks else None,
                       kernel_median=sorted(r[2] for r in sel)[len(sel) // 2])
        rows.append(row)
    return rows


def print_ops(rows):
    print(f"{'pair':10} {'run':24} {'ops':>6} {'calls':>6} {'median':>8} {'min':>8} {'mode':>8} {'share':>6} {'mean':>9} "
          f"{'block100':>9} {'kernel':>8}")
    for r in rows:
        if r["ops"] == 0:
            print(f"{r['pair']:10} {r['run']:24} {0:6} (no operation in the window)")
            continue
        print(f"{r['pair']:10} {r['run']:24} {r['ops']:6} {r['calls']:6} {r['median']:8} {r['min']:8} {r['mode']:8} "
              f"{r['mode_share']:6.2f} {r['mean']:9.1f} {r['block100'] or 0:9.1f} {r['kernel_median']:8}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--console", required=True)
    ap.add_argument("--totals")
    ap.add_argument("--ops")
    ap.add_argument("--json")
    ap.add_argument("--hist")
    ap.add_argument("--maps", nargs="*", default=[])
    ap.add_argument("--codelist", nargs="*", default=[])
    ap.add_argument("--perfmap", nargs="*", default=[])
    ap.add_argument("--heavy")
    ap.add_argument("--per-syscall", action="store_true")
    ap.add_argument("--counters")
    ap.add_argument("--window")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--region", type=int, default=256, help="the plugin's region size (2^shift)")
    a = ap.parse_args()
    if a.ops:
        rows = op_stats(a.console, a.ops, [float(x) for x in (a.window or "0.2:0.9").split(":")])
        print_ops(rows)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 0 if rows else 1
    if not a.totals:
        ap.error("give --totals (or --ops)")
    w0, w1 = (float(x) for x in (a.window or "0.3:0.8").split(":"))
    tot = [list(map(float, l.split())) for l in open(a.totals) if l.strip()]
    tt = [t[0] for t in tot]
    hist = load_hist(a.hist) if a.hist else []
    ht = [h[0] for h in hist]
    name = namer(a.maps, a.codelist, a.perfmap)
    heavy = [list(map(float, l.split())) for l in open(a.heavy) if l.strip()] if a.heavy else []
    hvt = [h[0] for h in heavy]
    if a.per_syscall and not heavy:
        ap.error("--per-syscall needs --heavy")

    def at(times, t):
        return min(bisect.bisect_left(times, t), len(times) - 1)

    runs = marked_runs(a.console)
    pkts = {}
    if a.counters:
        for pair in {r[0] for r in runs}:
            try:
                for line in open(f"{a.counters}/{pair}.counters"):
                    run, _, rest = line.partition(":")
                    m = re.search(r"\bsent_pkts=(\d+)", rest)
                    if m:
                        pkts[(pair, run.strip())] = int(m.group(1))
            except FileNotFoundError:
                pass
    for pair, run, t0, t1 in runs:
        if run.endswith("warm"):
            continue
        line = f"{pair} {run}:"
        whole_k = tot[at(tt, t1)][1] - tot[at(tt, t0)][1]
        if pkts.get((pair, run)):
            line += f" whole run: {whole_k / pkts[(pair, run)]:.0f} kernel instructions per sent packet;"
        ta, tb = t0 + w0 * (t1 - t0), t0 + w1 * (t1 - t0)
        if hist:
            i, j = at(ht, ta), at(ht, tb)
            ta, tb = ht[i], ht[j]
        x, y = tot[at(tt, ta)], tot[at(tt, tb)]
        dt = y[0] - x[0]
        if dt <= 0:
            print(line, "window too short")
            continue
        k, u = y[1] - x[1], y[2] - x[2]
        print(f"{line} window {dt:.1f} s: vCPU 0 kernel {k / dt / 1e6:.1f} M/s, user {u / dt / 1e6:.1f} M/s, "
              f"user per kernel instruction {u / k:.4f}")
        per, unit = k, "per kernel instruction"
        if heavy:
            # columns: time, then per vCPU (0, 1) and mode (kernel, user): lock fence pause rdtsc syscall
            hx, hy = heavy[at(hvt, ta)], heavy[at(hvt, tb)]
            d = [hy[c] - hx[c] for c in range(1, 21)]
            calls = d[9]
            norm, label = dt, "per second"
            if a.per_syscall and calls > 0:
                per, unit = norm, label = calls, "per user system call"
                print(f"    vCPU 0: {calls / dt:.0f} user system calls/s; per call: kernel {k / calls:.0f} and user "
                      f"{u / calls:.0f} instructions")
            kinds = ("lock", "fence", "pause", "rdtsc", "syscall")
            for mode, off in (("kernel", 0), ("user", 5)):
                print(f"    vCPU 0 {mode}, {label}: " + ", ".join(f"{kinds[c]} {d[off + c] / norm:.2f}" for c in range(5)))
        if hist:
            by = collections.Counter()
            for addr, c in hist[j][1].items():
                d = c - hist[i][1].get(addr, 0)
                if d > 0:
                    by[name(addr, a.region)] += d
            total = sum(by.values()) or 1
            for n, c in by.most_common(a.top):
                print(f"    {100 * c / total:5.1f}%  {c / per:.5g} {unit}  {n}")


if __name__ == "__main__":
    sys.exit(main())
