#!/usr/bin/env python3
"""tcg-sampler.py: what qemu's TCG does while a guest runs, sampled from the host.

  tcg-sampler.py sample SOCKET [INTERVAL_S]
      connects to qemu's human monitor on the Unix socket SOCKET (run-in-guest.sh with
      VERBS4J_GUEST_MONITOR=SOCKET) and prints, every INTERVAL_S (default 0.5) until qemu goes
      away, one line: the host's time (s since the epoch) and `info jit`'s counters
      (gen_code_bytes tb_count tb_flushes tb_invalidates tlb_full tlb_partial tlb_elided).
      Waits up to 120 s for the socket to appear.
  tcg-sampler.py stamp
      copies standard input to standard output, each line prefixed with the host's time, so that
      a guest's console lines (e.g. perftest-compare.sh's VERBS4J_PERF_MARKS lines) can be put
      beside the samples.
`sample` is a diagnostic for runs under TCG (docs/benchmarking.md); `stamp` also times the console
of benchmarks/insn-gate.sh, whose counts are matched to its runs by these times.
"""
import os
import re
import socket
import sys
import time

FIELDS = [("gen_code_bytes", r"gen code size\s+(\d+)"), ("tb_count", r"TB count\s+(\d+)"),
          ("tb_flushes", r"TB flush count\s+(\d+)"), ("tb_invalidates", r"TB invalidate count\s+(\d+)"),
          ("tlb_full", r"TLB full flushes\s+(\d+)"), ("tlb_partial", r"TLB partial flushes\s+(\d+)"),
          ("tlb_elided", r"TLB elided flushes\s+(\d+)")]


def read_until_prompt(s, buf=b""):
    while b"(qemu) " not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("qemu closed the monitor")
        buf += chunk
    head, _, rest = buf.partition(b"(qemu) ")
    return head.decode(errors="replace"), rest


def sample(path, interval):
    deadline = time.time() + 120
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit(f"tcg-sampler: no monitor socket at {path} within 120 s")
        time.sleep(0.2)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    _, rest = read_until_prompt(s)
    print("# time " + " ".join(name for name, _ in FIELDS), flush=True)
    try:
        while True:
            t = time.time()
            s.sendall(b"info jit\n")
            text, rest = read_until_prompt(s, rest)
            vals = []
            for _, rx in FIELDS:
                m = re.search(rx, text)
                vals.append(m.group(1) if m else "?")
            print(f"{t:.3f} " + " ".join(vals), flush=True)
            time.sleep(max(0.0, interval - (time.time() - t)))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass


def stamp():
    for line in sys.stdin:
        sys.stdout.write(f"{time.time():.3f} {line}")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "sample":
        sample(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 0.5)
    elif len(sys.argv) == 2 and sys.argv[1] == "stamp":
        stamp()
    else:
        sys.exit(__doc__)
