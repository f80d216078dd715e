package org.verbs4j.bench.perf;

import java.lang.foreign.MemorySegment;
import org.verbs4j.SendWorkRequests;

/**
 * The timed loops of verbs-perf, each following what the same perftest test does on the wire
 * and in its timing (timestamps at each post, and at each signaled completion for bandwidth),
 * so that a perftest peer sees the same traffic. They allocate nothing: the chains, the
 * completion array and the registered buffer are the {@link PerfSide}'s, the timestamp arrays
 * are allocated before timing starts, and inline sources are sliced before timing.
 */
final class PerfLoops {
    /** Progress lines (stderr) at most this often, only on runs longer than it. */
    static final long PROGRESS_NANOS = 5_000_000_000L;

    private PerfLoops() {
    }

    /** perftest's address step: the message rounded up to a cache line. */
    static long step(int size, int cacheLine) {
        return size > cacheLine ? ((size + (long) cacheLine - 1) / cacheLine) * cacheLine : cacheLine;
    }

    /**
     * Bandwidth client (WRITE, READ, SEND or atomic): {@code n} operations of {@code size} bytes,
     * at most {@code tx} in flight, every {@code cqMod}-th (and the last) signaled, {@code postList}
     * per post. Local and remote addresses advance by {@link #step} within the cycle buffer when
     * a message fits twice in it (as perftest does). {@code tposted[i]} is stamped at each post
     * of request i, {@code tcompleted[i]} at the completion of signaled request i.
     */
    static void bandwidth(PerfSide s, PerfTest.Verb verb, boolean cas, int size, long n, int tx, int cqMod, int postList,
                          MemorySegment inlineSrc, int cycle, int cacheLine, long[] tposted, long[] tcompleted,
                          String label, long timeoutNanos) {
        s.sendsDone = 0;
        s.tcompleted = tcompleted;
        long inc = step(size, cacheLine);
        long slots = postList == 1 && size <= cycle / 2 ? Math.max(1, cycle / inc) : 1;
        long remote = s.remoteAddr;
        int rkey = s.remoteKey;
        long posted = 0;
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        long lastDone = 0;
        long stalledSince = lastProgress;
        while (s.sendsDone < n) {
            while (posted < n && posted - s.sendsDone + postList <= tx) {
                int k = (int) Math.min(postList, n - posted);
                SendWorkRequests w = s.swr.clear();
                for (int j = 0; j < k; j++) {
                    long id = posted + j;
                    long off = (id % slots) * inc;
                    switch (verb) {
                        case WRITE -> w.write(id, remote + off, rkey);
                        case READ -> w.read(id, remote + off, rkey);
                        case SEND -> {
                            w.send(id);
                            s.destination(w);
                        }
                        case ATOMIC -> {
                            if (cas) {
                                w.compareAndSwap(id, remote + off, rkey, 0, 1);
                            } else {
                                w.fetchAndAdd(id, remote + off, rkey, 1);
                            }
                        }
                    }
                    if (inlineSrc != null) {
                        w.inline(inlineSrc);
                    } else {
                        w.sge(s.mr, s.base + off, size);
                    }
                    if ((id + 1) % cqMod == 0 || id + 1 == n) {
                        w.signaled();
                    }
                }
                tposted[(int) posted] = System.nanoTime();
                s.qp.postSend(w);
                posted += k;
            }
            s.pollOnce();
            if (s.sendsDone != lastDone) {
                lastDone = s.sendsDone;
                long now = System.nanoTime();
                stalledSince = now;
                if (now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, lastDone, n, now - start);
                }
            } else if (System.nanoTime() - stalledSince > timeoutNanos) {
                throw new IllegalStateException("no send completion within " + timeoutNanos / 1_000_000_000L + " s ("
                        + s.sendsDone + " of " + n + " completed; check the peer, its options and the link)");
            }
        }
        s.tcompleted = null;
    }

    /** Bandwidth server of send_bw: waits for the {@code n} receives (posted by {@link PerfSide#startReceives}). */
    static void receiveAll(PerfSide s, long n, String label, long timeoutNanos) {
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        long lastDone = -1;
        long stalledSince = lastProgress;
        while (s.recvsDone < n) {
            s.pollOnce();
            long now = System.nanoTime();
            if (s.recvsDone != lastDone) {
                lastDone = s.recvsDone;
                stalledSince = now;
                if (now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, lastDone, n, now - start);
                }
            } else if (now - stalledSince > timeoutNanos) {
                throw new IllegalStateException("no receive within " + timeoutNanos / 1_000_000_000L + " s ("
                        + s.recvsDone + " of " + n + " received; check the peer, its options and the link)");
            }
        }
    }

    static void progress(String label, long done, long n, long nanos) {
        System.err.printf("  %s: %d of %d done after %.1f s%n", label, done, n, nanos / 1e9);
    }

    /**
     * Ping-pong as perftest's write_lat ({@code send} false) and send_lat ({@code send} true).
     * The side that goes first ({@code first}: the SERVER in write_lat, the CLIENT in send_lat)
     * sends without waiting; then each side waits for the peer's message before sending its
     * own, and for each send's completion. A WRITE's arrival is seen in its last byte, which
     * carries the iteration count as a byte; a SEND's as a receive completion (receives were
     * posted by {@link PerfSide#startReceives} before the barrier). {@code tposted[i]}: post i.
     */
    static void pingPong(PerfSide s, boolean send, boolean first, int size, long n, MemorySegment inlineSrc,
                         long[] tposted, String label) {
        s.sendsDone = 0;
        s.tcompleted = null;
        long scnt = 0;
        long rcnt = 0;
        long last = size - 1L;
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        while (scnt < n || rcnt < n) {
            if (rcnt < n && !(scnt < 1 && first)) {
                rcnt++;
                if (send) {
                    s.awaitRecvs(rcnt);
                } else {
                    s.awaitMarker(last, (byte) rcnt);
                }
            }
            if (scnt < n) {
                long now = System.nanoTime();
                tposted[(int) scnt] = now;
                scnt++;
                SendWorkRequests w = s.swr.clear();
                if (send) {
                    w.send(scnt - 1);
                    s.destination(w);
                } else {
                    s.setSendByte(last, (byte) scnt);
                    w.write(scnt - 1, s.remoteAddr, s.remoteKey);
                }
                if (inlineSrc != null) {
                    w.inline(inlineSrc);
                } else {
                    w.sge(s.mr, s.base, size);
                }
                s.qp.postSend(w.signaled());
                s.awaitSends(scnt);
                if ((scnt & 1023) == 0 && now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, scnt, n, now - start);
                }
            }
        }
    }

    /** RDMA READ or atomic latency as perftest's read_lat/atomic_lat: one operation at a time. */
    static void readLatency(PerfSide s, PerfTest.Verb verb, boolean cas, int size, long n, long[] tposted, String label) {
        s.sendsDone = 0;
        s.tcompleted = null;
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        for (long i = 0; i < n; i++) {
            long now = System.nanoTime();
            tposted[(int) i] = now;
            SendWorkRequests w = s.swr.clear();
            if (verb == PerfTest.Verb.READ) {
                w.read(i, s.remoteAddr, s.remoteKey);
            } else if (cas) {
                w.compareAndSwap(i, s.remoteAddr, s.remoteKey, 0, 1);
            } else {
                w.fetchAndAdd(i, s.remoteAddr, s.remoteKey, 1);
            }
            s.qp.postSend(w.sge(s.mr, s.base, size).signaled());
            s.awaitSends(i + 1);
            if ((i & 1023) == 0 && now - lastProgress > PROGRESS_NANOS) {
                lastProgress = now;
                progress(label, i, n, now - start);
            }
        }
    }
}
