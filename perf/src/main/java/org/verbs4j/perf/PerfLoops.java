package org.verbs4j.perf;

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

    private PerfLoops() {}

    /** perftest's address step: the message rounded up to a cache line. */
    static long step(int size, int cacheLine) {
        return size > cacheLine ? ((size + (long) cacheLine - 1) / cacheLine) * cacheLine : cacheLine;
    }

    /**
     * Bandwidth client (WRITE, READ, SEND or atomic) over one QP or more: as
     * {@link #bandwidth(PerfSide, PerfTest.Verb, boolean, int, long, int, int, int, MemorySegment, int, int, long[], long[], String, long, PerfDuration, boolean, boolean)}
     * for {@code n} operations per QP, sends only.
     */
    static void bandwidth(
            PerfSide s,
            PerfTest.Verb verb,
            boolean cas,
            int size,
            long n,
            int tx,
            int cqMod,
            int postList,
            MemorySegment inlineSrc,
            int cycle,
            int cacheLine,
            long[] tposted,
            long[] tcompleted,
            String label,
            long timeoutNanos) {
        bandwidth(
                s,
                verb,
                cas,
                size,
                n,
                tx,
                cqMod,
                postList,
                inlineSrc,
                cycle,
                cacheLine,
                tposted,
                tcompleted,
                label,
                timeoutNanos,
                null,
                false,
                false);
    }

    /**
     * The bandwidth loop, as perftest's run_iter_bw (and run_iter_bi with {@code receive}): in turn
     * for each QP, posts while that QP has fewer than {@code tx} requests in flight, {@code postList}
     * per post, every {@code cqMod}-th of the QP (and its last) signaled; then polls the shared CQ
     * once. Iterations mode ({@code duration} null): {@code n} operations per QP, the loop ends when
     * all {@code n x QPs} completed (and, with {@code receive}, as many receives arrived).
     * Duration mode: the loop runs until {@code duration} ends, which starts now or, with
     * {@code waitFirstRx} (the server of a bidirectional send_bw), at the first receive, before
     * which nothing is sent. Local and remote addresses advance by {@link #step} within the cycle
     * buffer when a message fits twice in it (as perftest does). In iterations mode
     * {@code tposted[i]} is stamped at each post of request i (counted over all QPs) and
     * {@code tcompleted[i]} at the completion that brings the total to i + 1.
     */
    static void bandwidth(
            PerfSide s,
            PerfTest.Verb verb,
            boolean cas,
            int size,
            long n,
            int tx,
            int cqMod,
            int postList,
            MemorySegment inlineSrc,
            int cycle,
            int cacheLine,
            long[] tposted,
            long[] tcompleted,
            String label,
            long timeoutNanos,
            PerfDuration duration,
            boolean receive,
            boolean waitFirstRx) {
        s.resetSends(false);
        s.tcompleted = duration != null ? null : tcompleted;
        BandwidthPasses loop = new BandwidthPasses(
                s,
                verb,
                cas,
                size,
                n,
                tx,
                cqMod,
                postList,
                inlineSrc,
                cycle,
                cacheLine,
                tposted,
                label,
                timeoutNanos,
                duration,
                receive,
                waitFirstRx);
        while (loop.pass()) {
            // each pass is a call: see BandwidthPasses
        }
        s.tcompleted = null;
    }

    /** The most address slots whose unsignaled requests a bandwidth run builds before timing (perftest: a page / a cache line = 64). */
    private static final long MAX_PREBUILT_SLOTS = 1024;

    /**
     * One run of {@link #bandwidth}, one pass of its loop per {@link #pass} call. The loop ran
     * inside {@code bandwidth}, called once per run and size, which the JIT compiles only by
     * on-stack replacement: in the guest (-Xlog:jit+compilation, write_bw -D 4 with one warm run)
     * its C2 version came in the middle of the measured run, the JVM's sixth, and the compile
     * shared the vCPU the loop is pinned to. As a method called once per pass, {@code pass} is
     * compiled within the first run with the JIT at its default priority; with the compiler threads
     * at nice 19 (perftest-compare.sh in the guest) its C1 and C2 versions come some runs later,
     * compiled between runs rather than beside the loop. The
     * fields are the loop's variables; allocated before timing.
     */
    private static final class BandwidthPasses {
        private final PerfSide s;
        private final PerfTest.Verb verb;
        private final boolean cas, timed, receive, waitFirstRx;
        private final int size, tx, cqMod, postList, nq;
        private final MemorySegment inlineSrc;
        private final long[] tposted, posted, done;
        /**
         * Per QP, the unsignaled requests built before timing, one per address slot (null: built
         * per post). perftest posts the requests it built before its loop and changes only what
         * varies between posts (the addresses, when a message fits twice in the cycle buffer; the
         * SIGNALED flag); with one request per post, the unsignaled posts here are requests built
         * once per QP and slot (request i posts slot i % slots), and only the signaled ones (every
         * cqMod-th, and the last) are built per post, so that their wr_id carries the index the
         * completion counts up to. Rebuilding every request per post would cost ~660 guest
         * instructions more per post than perftest's loop.
         */
        private final SendWorkRequests[][] unsignaled;

        private final String label;
        private final long timeoutNanos, total, perQp, inc, slots, start;
        private final PerfDuration duration;
        private long totalPosted, lastProgress, lastCount, stalledSince;
        // the clock is read when completions arrive and every 256 empty polls, not on every pass
        // (perftest's loop reads none: its duration mode runs on SIGALRM; and in a Soft-RoCE guest
        // System.nanoTime is a ~1 us system call)
        private long now;
        private boolean fresh = true;
        private int idle;

        BandwidthPasses(
                PerfSide s,
                PerfTest.Verb verb,
                boolean cas,
                int size,
                long n,
                int tx,
                int cqMod,
                int postList,
                MemorySegment inlineSrc,
                int cycle,
                int cacheLine,
                long[] tposted,
                String label,
                long timeoutNanos,
                PerfDuration duration,
                boolean receive,
                boolean waitFirstRx) {
            this.s = s;
            this.verb = verb;
            this.cas = cas;
            this.size = size;
            this.tx = tx;
            this.cqMod = cqMod;
            this.postList = postList;
            this.inlineSrc = inlineSrc;
            this.tposted = tposted;
            this.label = label;
            this.timeoutNanos = timeoutNanos;
            this.duration = duration;
            this.receive = receive;
            this.waitFirstRx = waitFirstRx;
            this.timed = duration != null;
            this.nq = s.qps.length;
            this.total = timed ? Long.MAX_VALUE : n * nq;
            this.perQp = timed ? Long.MAX_VALUE : n;
            this.inc = step(size, cacheLine);
            this.slots = postList == 1 && size <= cycle / 2 ? Math.max(1, cycle / inc) : 1;
            this.posted = s.qpPosted;
            this.done = s.qpSendsDone;
            if (postList == 1 && slots <= MAX_PREBUILT_SLOTS) {
                this.unsignaled = new SendWorkRequests[nq][];
                for (int q = 0; q < nq; q++) {
                    unsignaled[q] = s.unsignaled(q, (int) slots);
                    for (int k = 0; k < slots; k++) {
                        long off = k * inc;
                        request(
                                s,
                                unsignaled[q][k].clear(),
                                verb,
                                cas,
                                size,
                                inlineSrc,
                                PerfSide.wrId(q, k),
                                s.remoteAddrs[q] + off,
                                s.remoteKeys[q],
                                s.base + s.sendOffset(q) + off);
                    }
                }
            } else {
                this.unsignaled = null;
            }
            this.start = System.nanoTime();
            this.lastProgress = start;
            this.stalledSince = start;
            this.now = start;
            if (timed && !waitFirstRx) {
                duration.start(start);
            }
        }

        /** One pass: checks the end, posts while there is room, polls once; false once the run is over. */
        boolean pass() {
            long count = s.sendsDone + (receive ? s.recvsDone : 0);
            if (timed) {
                if (fresh) { // a new clock reading since the last pass (else nothing can have changed)
                    if (!duration.started()) {
                        if (s.recvsDone > 0) {
                            duration.start(now);
                        }
                    } else if (duration.ended(now, count)) {
                        return false;
                    }
                }
            } else if (s.sendsDone >= total && (!receive || s.recvsDone >= total)) {
                return false;
            }
            if (!waitFirstRx || s.recvsDone > 0) {
                for (int q = 0; q < nq; q++) {
                    long remote = s.remoteAddrs[q];
                    int rkey = s.remoteKeys[q];
                    long local = s.base + s.sendOffset(q);
                    while (posted[q] < perQp && posted[q] - done[q] + postList <= tx) {
                        int k = (int) Math.min(postList, perQp - posted[q]);
                        SendWorkRequests w = unsignaled != null && !signaled(posted[q], cqMod, perQp)
                                ? unsignaled[q][(int) (posted[q] % slots)]
                                : chain(
                                        s, verb, cas, size, perQp, cqMod, inlineSrc, inc, slots, q, remote, rkey, local,
                                        posted[q], k);
                        if (!timed) {
                            tposted[(int) totalPosted] = System.nanoTime();
                        }
                        s.post(s.qps[q], w);
                        posted[q] += k;
                        totalPosted += k;
                    }
                }
            }
            s.pollOnce();
            long after = s.sendsDone + s.recvsDone;
            fresh = false;
            if (after != lastCount) {
                lastCount = after;
                now = System.nanoTime();
                fresh = true;
                idle = 0;
                stalledSince = now;
                if (!timed && now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, s.sendsDone, total, now - start);
                }
            } else if ((++idle & 0xff) == 0) {
                now = System.nanoTime();
                fresh = true;
                if (now - stalledSince > timeoutNanos) {
                    throw new IllegalStateException("no completion within " + timeoutNanos / 1_000_000_000L + " s ("
                            + s.sendsDone + " sends" + (timed ? "" : " of " + total) + " completed, " + s.recvsDone
                            + " receives; check the peer, its options and the link)");
                }
            }
            return true;
        }
    }

    /**
     * The chain of {@code k} requests of {@link #bandwidth} from request {@code first} of QP
     * {@code q}, built in {@code s.swr}. A method of its own, called once per post, so that the JIT
     * compiles it within the first thousands of posts of a JVM's first run, as it does
     * {@code postSend}, {@code pollOnce} and {@link BandwidthPasses#pass}.
     */
    private static SendWorkRequests chain(
            PerfSide s,
            PerfTest.Verb verb,
            boolean cas,
            int size,
            long perQp,
            int cqMod,
            MemorySegment inlineSrc,
            long inc,
            long slots,
            int q,
            long remote,
            int rkey,
            long local,
            long first,
            int k) {
        SendWorkRequests w = s.swr.clear();
        for (int j = 0; j < k; j++) {
            long id = first + j;
            long off = (id % slots) * inc;
            request(s, w, verb, cas, size, inlineSrc, PerfSide.wrId(q, id), remote + off, rkey, local + off);
            if (signaled(id, cqMod, perQp)) {
                w.signaled();
            }
        }
        return w;
    }

    /** Whether request {@code id} of a QP is signaled: every {@code cqMod}-th, and the QP's last (perftest's rule). */
    private static boolean signaled(long id, int cqMod, long perQp) {
        return (id + 1) % cqMod == 0 || id + 1 == perQp;
    }

    /** Appends one unsignaled request of the bandwidth loop to {@code w}. */
    private static void request(
            PerfSide s,
            SendWorkRequests w,
            PerfTest.Verb verb,
            boolean cas,
            int size,
            MemorySegment inlineSrc,
            long wr,
            long remote,
            int rkey,
            long local) {
        switch (verb) {
            case WRITE -> w.write(wr, remote, rkey);
            case READ -> w.read(wr, remote, rkey);
            case SEND -> {
                w.send(wr);
                s.destination(w);
            }
            case ATOMIC -> {
                if (cas) {
                    w.compareAndSwap(wr, remote, rkey, 0, 1);
                } else {
                    w.fetchAndAdd(wr, remote, rkey, 1);
                }
            }
        }
        if (inlineSrc != null) {
            w.inline(inlineSrc);
        } else {
            w.sge(s.mr, local, size);
        }
    }

    /**
     * Bandwidth server of send_bw: waits for the {@code n} receives per QP (posted by
     * {@link PerfSide#startReceives}); in duration mode ({@code duration} not null) counts receives
     * from the first one until the duration ends, as perftest's run_iter_bw_server.
     */
    static void receiveAll(PerfSide s, long n, String label, long timeoutNanos, PerfDuration duration) {
        long total = duration != null ? Long.MAX_VALUE : n * s.qps.length;
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        long lastDone = -1;
        long stalledSince = lastProgress;
        int idle = 0;
        while (s.recvsDone < total) {
            // the clock only when receives arrived or every 256 empty polls (see bandwidth)
            if (s.pollOnce() == 0 && (++idle & 0xff) != 0) {
                continue;
            }
            long now = System.nanoTime();
            if (duration != null) {
                if (!duration.started()) {
                    if (s.recvsDone > 0) {
                        duration.start(now);
                    }
                } else if (duration.ended(now, s.recvsDone)) {
                    return;
                }
            }
            if (s.recvsDone != lastDone) {
                lastDone = s.recvsDone;
                stalledSince = now;
                if (duration == null && now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, lastDone, total, now - start);
                }
            } else if (now - stalledSince > timeoutNanos && (duration == null || !duration.started())) {
                throw new IllegalStateException("no receive within " + timeoutNanos / 1_000_000_000L + " s ("
                        + s.recvsDone + (duration == null ? " of " + total : "")
                        + " received; check the peer, its options and the link)");
            }
        }
    }

    /** As {@link #receiveAll(PerfSide, long, String, long, PerfDuration)} in iterations mode. */
    static void receiveAll(PerfSide s, long n, String label, long timeoutNanos) {
        receiveAll(s, n, label, timeoutNanos, null);
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
    static void pingPong(
            PerfSide s,
            boolean send,
            boolean first,
            int size,
            long n,
            MemorySegment inlineSrc,
            long[] tposted,
            String label) {
        s.resetSends(true);
        s.tcompleted = null;
        // one request, built once and posted n times, as perftest posts its one ibv_send_wr
        SendWorkRequests w = s.swr.clear();
        if (send) {
            w.send(0);
            s.destination(w);
        } else {
            w.write(0, s.remoteAddr, s.remoteKey);
        }
        if (inlineSrc != null) {
            w.inline(inlineSrc);
        } else {
            w.sge(s.mr, s.base, size);
        }
        // write_lat's marker goes where each post reads its payload: the inline bytes or the send half
        MemorySegment marker = send ? null : inlineSrc != null ? w.inlineData(0) : s.buffer;
        w.signaled();
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
                long now = postAndWait(s, w, marker, last, scnt);
                tposted[(int) scnt] = now;
                scnt++;
                if ((scnt & 1023) == 0 && now - lastProgress > PROGRESS_NANOS) {
                    lastProgress = now;
                    progress(label, scnt, n, now - start);
                }
            }
        }
    }

    /**
     * One operation of {@link #pingPong} and {@link #readLatency}: stamps, writes the marker of
     * message {@code i} at {@code last} of {@code marker} (write_lat; null otherwise), posts the
     * prebuilt request {@code w} and waits for its completion; returns the stamp. A method of its
     * own so that the JIT compiles it after a few thousand calls: a loop that runs once per size, a
     * few thousand passes, is not compiled (on-stack replacement waits for tens of thousands of passes).
     */
    private static long postAndWait(PerfSide s, SendWorkRequests w, MemorySegment marker, long last, long i) {
        long now = System.nanoTime();
        if (marker != null) {
            PerfSide.BYTE.setRelease(marker, last, (byte) (i + 1));
        }
        s.post(s.qp, w);
        s.awaitSends(i + 1);
        return now;
    }

    /**
     * RDMA READ or atomic latency as perftest's read_lat/atomic_lat: one operation at a time, the
     * request built once per size and posted {@code n} times (perftest's one ibv_send_wr).
     */
    static void readLatency(
            PerfSide s, PerfTest.Verb verb, boolean cas, int size, long n, long[] tposted, String label) {
        s.resetSends(true);
        s.tcompleted = null;
        SendWorkRequests w = s.swr.clear();
        if (verb == PerfTest.Verb.READ) {
            w.read(0, s.remoteAddr, s.remoteKey);
        } else if (cas) {
            w.compareAndSwap(0, s.remoteAddr, s.remoteKey, 0, 1);
        } else {
            w.fetchAndAdd(0, s.remoteAddr, s.remoteKey, 1);
        }
        w.sge(s.mr, s.base, size).signaled();
        long lastProgress = System.nanoTime();
        long start = lastProgress;
        for (long i = 0; i < n; i++) {
            long now = postAndWait(s, w, null, 0, i);
            tposted[(int) i] = now;
            if ((i & 1023) == 0 && now - lastProgress > PROGRESS_NANOS) {
                lastProgress = now;
                progress(label, i, n, now - start);
            }
        }
    }
}
