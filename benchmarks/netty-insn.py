#!/usr/bin/env python3
"""netty-insn.py: user-mode instructions per echo round trip, verbs-netty beside verbs-perf's send_lat.

  netty-insn.py --console STAMPED --ops OPS

STAMPED: the guest console of `benchmarks/netty-bench.sh --insn` through `tcg-sampler.py stamp`;
OPS: tcg-insn-plugin.c's ops= records of the client's vCPU (vCPU 0), one per user-mode system call.

verbs-perf send_lat (the runs perftest-compare.sh marked): counted as benchmarks/insn-gate.sh counts
(softroce/tcg-insn-report.py --ops: operations delimited by the post's write(2), over the middle of
each run): the most frequent count, the median, and the mean of all the window's instructions per
operation. verbs-netty echo (the blocks NettyBench --count-echo marked): an echo round trip makes
several system calls (the post, epoll_wait, the completion channel's read, the notify request), so
no one call delimits it; its figure is the mean: all user instructions of vCPU 0 between the block's
two marks (the client JVM's JIT and GC threads included) divided by the block's round trips. Each
figure's lowest over the runs is the one compared (the JIT only improves the code over the runs).
"""
import argparse
import bisect
import importlib.util
import os
import re
import sys

NETTY_MARK = re.compile(r"([\d.]+) \[netty-bench\] mark (start|end) (\S+) (.*) n=(\d+)")


def report_module():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "softroce", "tcg-insn-report.py")
    spec = importlib.util.spec_from_file_location("tcg_insn_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_ops(path):
    recs = []
    for line in open(path):
        if not line.startswith("#"):
            p = line.split()
            recs.append((float(p[0]), int(p[1])))
    recs.sort()
    return recs


def netty_blocks(console, recs):
    """per marked block: (name, size, round trips, user instructions between its marks)"""
    times = [r[0] for r in recs]
    starts, rows = {}, []
    for line in open(console, errors="replace"):
        m = NETTY_MARK.match(line.strip())
        if not m:
            continue
        t, what, name, run, n = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip(), int(m.group(5))
        if what == "start":
            starts[(name, run)] = t
        elif (name, run) in starts:
            t0 = starts.pop((name, run))
            i0, i1 = bisect.bisect_right(times, t0), bisect.bisect_right(times, t)
            user = sum(r[1] for r in recs[i0:i1])
            rows.append((name, run, n, user, i1 - i0))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--console", required=True)
    ap.add_argument("--ops", required=True)
    a = ap.parse_args()
    recs = load_ops(a.ops)
    times = [r[0] for r in recs]
    print("user-mode instructions of the client's vCPU per round trip (tcg-insn-plugin.c, opdelay 300 us)")
    print(f"{'what':34} {'run':>4} {'ops':>6} {'mode':>8} {'median':>8} {'mean':>9}")
    perf = {}
    for r in report_module().op_stats(a.console, a.ops, (0.2, 0.9)):
        if r["ops"] == 0 or not r["pair"].startswith("vp-"):
            if r["ops"]:
                print(f"{r['pair'] + ' ' + r['test'] + ' ' + str(r['size']) + ' B (perftest)':34} "
                      f"{r['run'].split()[-1]:>4} {r['ops']:6} {r['mode']:8} {r['median']:8}")
            continue
        t0, t1 = [(s, e) for p, run, s, e in report_module().marked_runs(a.console)
                  if p == r["pair"] and run == r["run"]][0]
        ta, tb = t0 + 0.2 * (t1 - t0), t0 + 0.9 * (t1 - t0)
        user = sum(x[1] for x in recs[bisect.bisect_right(times, ta):bisect.bisect_right(times, tb)])
        mean = user / r["ops"]
        perf.setdefault(r["size"], []).append(mean)
        print(f"{'verbs-perf send_lat ' + str(r['size']) + ' B':34} {r['run'].split()[-1]:>4} {r['ops']:6} "
              f"{r['mode']:8} {r['median']:8} {mean:9.0f}")
    netty = {}
    for name, run, n, user, calls in netty_blocks(a.console, recs):
        size = int(run.split()[1])
        netty.setdefault(size, []).append(user / n)
        print(f"{'verbs-netty ' + name + ' ' + str(size) + ' B':34} {run.split()[2]:>4} {n:6} {'':8} {'':8} "
              f"{user / n:9.0f}   ({calls / n:.1f} system calls a round trip)")
    ok = False
    for size in sorted(netty):
        if size in perf:
            ok = True
            print(f"ratio verbs-netty echo / verbs-perf send_lat, {size} B, lowest mean of the runs: "
                  f"{min(netty[size]):.0f} / {min(perf[size]):.0f} = {min(netty[size]) / min(perf[size]):.2f}")
    if not ok:
        print("no size counted for both verbs-netty and verbs-perf")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
