#!/usr/bin/env python3
"""tcg-insn-report.py: instructions per run from tcg-insn-plugin.c's counts, beside perftest-compare.sh's marks.

  tcg-insn-report.py --console STAMPED --totals TOTALS [--hist HIST] [--heavy HEAVY] [--maps FILE ...]
                     [--codelist FILE ...] [--perfmap FILE ...] [--counters DIR] [--window 0.3:0.8]
                     [--top 8] [--per-syscall]

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

For every measured (not warm) run of every pair: vCPU 0's kernel and user instructions per second
over the middle of the run (--window, fractions of the time between its marks: the loop, not the
set-up), their ratio, and the regions HIST puts vCPU 0's user instructions in over that window.
"""
import argparse
import bisect
import collections
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--console", required=True)
    ap.add_argument("--totals", required=True)
    ap.add_argument("--hist")
    ap.add_argument("--maps", nargs="*", default=[])
    ap.add_argument("--codelist", nargs="*", default=[])
    ap.add_argument("--perfmap", nargs="*", default=[])
    ap.add_argument("--heavy")
    ap.add_argument("--per-syscall", action="store_true")
    ap.add_argument("--counters")
    ap.add_argument("--window", default="0.3:0.8")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--region", type=int, default=256, help="the plugin's region size (2^shift)")
    a = ap.parse_args()
    w0, w1 = (float(x) for x in a.window.split(":"))
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

    starts, runs = {}, []
    for line in open(a.console):
        m = MARK.match(line)
        if m:
            t, what, pair, run = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
            if what == "start":
                starts[(pair, run)] = t
            elif (pair, run) in starts:
                runs.append((pair, run, starts[(pair, run)], t))
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
