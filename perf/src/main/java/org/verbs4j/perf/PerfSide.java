package org.verbs4j.perf;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.EnumSet;
import org.verbs4j.Access;
import org.verbs4j.AddressHandle;
import org.verbs4j.CompletionOpcode;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * One side of a verbs-perf test: a CQ, one or more ({@code -q}) RC, UC or UD QPs sharing it (UD: one), and ONE
 * buffer from the {@link BufferProvider}, registered once before any timing, laid out as perftest
 * lays out its own: per QP {@code i} a send half ({@code [2i slot, (2i+1) slot)}) and a receive
 * half ({@code [(2i+1) slot, (2i+2) slot)}) whose address is what the peer's QP {@code i} is told
 * ({@link #localVaddr(int)}), so that a perftest peer's writes land where this side polls and the
 * other way round. A send's work-request id carries its QP ({@link #wrId}). The work-request
 * chains, the per-QP counters and the completion array are preallocated: the methods the timed
 * loops call allocate nothing. One thread: the thread that creates it uses and closes it, so its CQ
 * is confined to that thread ({@link org.verbs4j.Context#createConfinedCompletionQueue}): a poll
 * skips the shared CQ's gate, as perftest's one-threaded loops take no lock of their own.
 */
final class PerfSide implements AutoCloseable {
    static final VarHandle BYTE = JAVA_BYTE.varHandle();

    /** Bits of a work-request id below its QP index: the request's index on that QP. */
    static final int QP_SHIFT = 40;

    static final long INDEX_MASK = (1L << QP_SHIFT) - 1;

    final CompletionQueue cq;
    /** All QPs ({@code -q}); {@link #qp} is the first. */
    final QueuePair[] qps;

    final QueuePair qp;
    /** Post through the extended API ({@code ibv_wr_*}, {@code --use_new_post_send}) instead of {@code ibv_post_send}. */
    final boolean extendedPost;

    final BufferProvider.PerfBuffer buf;
    final MemorySegment buffer;
    final MemoryRegion mr;
    /** Bytes of each half: max(cycle buffer, largest message), rounded up to a page. */
    final long slot;
    /** Where the buffer starts in {@link #mr}: every SGE offset adds it. */
    final long base;

    final SendWorkRequests swr;
    /**
     * Per QP, the requests the bandwidth loop builds before timing and posts again for every
     * unsignaled request: one per address the message cycles through (see PerfLoops.bandwidth),
     * made by {@link #unsignaled} as a run needs them and kept for the next runs.
     */
    private final SendWorkRequests[][] unsignaledSwr;

    private final int inline;
    final ReceiveWorkRequests rwr;
    final WorkCompletions wcs;
    private final long timeoutNanos;
    /** Where the QP came from when not from {@code pd} (rdma_cm): closes it before the CQ and buffer go. */
    private final Runnable releaseQp;

    /** The peer's buffer and key for QP 0 (the latency loops) and per QP. */
    long remoteAddr;

    int remoteKey;
    final long[] remoteAddrs;
    final int[] remoteKeys;
    /** Send WRs completed, over all QPs: the sum of {@link #qpSendsDone}. */
    long sendsDone;
    /** Per QP: index + 1 of its newest completed signaled send WR. */
    final long[] qpSendsDone;
    /** Receive completions reaped, over all QPs (reset per size). */
    long recvsDone;
    /** Receives posted, over all QPs and per QP (reset per size), and the total to post per QP. */
    long recvsPosted;

    final long[] qpRecvsPosted;
    long recvLimit;
    /** Per QP: send WRs posted (the bandwidth loop's). */
    final long[] qpPosted;
    /**
     * Nanos of the first and last receive completion of a size, stamped only while
     * {@link #stampRecvs} is set (the send_bw receiver's report needs them; a latency loop does not).
     */
    long firstRecvNanos;

    long lastRecvNanos;
    boolean stampRecvs;
    /** Whether each send completion counts one (see {@link #resetSends}). */
    private boolean countEachSend;
    /** When set (bandwidth client), {@code tcompleted[done - 1]} is stamped at each send completion. */
    long[] tcompleted;
    /** UD ({@link UdTransport}): the destination of sends (null otherwise), closed with this side. */
    AddressHandle udAh;
    /** UD: the peer's QP number. */
    int udRemoteQpn;
    /** UD: where receives start in the receive half, and the bytes they add to the message (the GRH). */
    long udRecvShift;

    int udRecvExtra;

    /** Where QPs come from when not from the protection domain (rdma_cm's connected QPs). */
    @FunctionalInterface
    interface QpSource {
        /** {@code count} QPs on {@code cq}, as {@code init} describes them. */
        QueuePair[] create(CompletionQueue cq, QueuePairInit init, int count);
    }

    PerfSide(
            ProtectionDomain pd,
            BufferProvider provider,
            QueuePairType type,
            int maxMessage,
            int cycleBuffer,
            int sendDepth,
            int postList,
            int recvDepth,
            int inline,
            long timeoutNanos) {
        this(
                pd,
                provider,
                type,
                1,
                maxMessage,
                cycleBuffer,
                sendDepth,
                postList,
                recvDepth,
                inline,
                timeoutNanos,
                null,
                null,
                false);
    }

    /**
     * {@code qpCount} QPs, each with {@code sendDepth} and {@code recvDepth}; they come from
     * {@code qpSource} when given (rdma_cm's connected QPs; QPs on a parent domain; QPs of the
     * extended API, which {@code extendedPost} then posts through), and {@code releaseQp} closes them.
     */
    PerfSide(
            ProtectionDomain pd,
            BufferProvider provider,
            QueuePairType type,
            int qpCount,
            int maxMessage,
            int cycleBuffer,
            int sendDepth,
            int postList,
            int recvDepth,
            int inline,
            long timeoutNanos,
            QpSource qpSource,
            Runnable releaseQp,
            boolean extendedPost) {
        if (qpCount < 1) {
            throw new IllegalArgumentException("at least one QP: " + qpCount);
        }
        this.timeoutNanos = timeoutNanos;
        this.extendedPost = extendedPost;
        this.releaseQp = releaseQp;
        long s = Math.max(cycleBuffer, maxMessage);
        this.slot = Math.max(4096, (s + 4095L) & ~4095L);
        CompletionQueue c = null;
        QueuePair[] q = new QueuePair[qpCount];
        BufferProvider.PerfBuffer b = null;
        try {
            c = pd.context().createConfinedCompletionQueue((int)
                    Math.min(Integer.MAX_VALUE / 2, (long) qpCount * (sendDepth + recvDepth) + 16));
            QueuePairInit init = QueuePairInit.of(type, c)
                    .maxSendWr(sendDepth)
                    .maxRecvWr(Math.max(1, recvDepth))
                    .maxSendSge(1)
                    .maxRecvSge(1);
            if (inline > 0) {
                init = init.maxInlineData(inline);
            }
            if (qpSource == null) {
                for (int i = 0; i < qpCount; i++) {
                    q[i] = pd.createQueuePair(init);
                }
            } else {
                q = qpSource.create(c, init, qpCount);
            }
            b = provider.allocate(
                    pd,
                    2 * slot * qpCount,
                    EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
        } catch (RuntimeException e) {
            if (releaseQp != null) {
                releaseQp.run();
                q = new QueuePair[0];
            }
            AutoCloseable[] all = new AutoCloseable[q.length + 2];
            all[0] = b;
            System.arraycopy(q, 0, all, 1, q.length);
            all[all.length - 1] = c;
            for (AutoCloseable r : all) {
                if (r != null) {
                    try {
                        r.close();
                    } catch (Exception x) {
                        e.addSuppressed(x);
                    }
                }
            }
            throw e;
        }
        this.cq = c;
        this.qps = q;
        this.qp = q[0];
        this.remoteAddrs = new long[qpCount];
        this.remoteKeys = new int[qpCount];
        this.qpSendsDone = new long[qpCount];
        this.qpRecvsPosted = new long[qpCount];
        this.qpPosted = new long[qpCount];
        this.buf = b;
        this.buffer = b.segment();
        this.mr = b.region();
        this.base = b.offset();
        this.swr = new SendWorkRequests(Math.max(1, postList), 1, inline);
        this.inline = inline;
        this.unsignaledSwr = new SendWorkRequests[qpCount][0];
        this.rwr = new ReceiveWorkRequests(1, 1);
        this.wcs = new WorkCompletions(64);
    }

    /**
     * QP {@code qp}'s first {@code count} prebuilt one-request chains (made here the first time a
     * run asks for that many; the array may be longer). Before timing only: it allocates.
     */
    SendWorkRequests[] unsignaled(int qp, int count) {
        SendWorkRequests[] have = unsignaledSwr[qp];
        if (have.length < count) {
            SendWorkRequests[] more = java.util.Arrays.copyOf(have, count);
            for (int i = have.length; i < count; i++) {
                more[i] = new SendWorkRequests(1, 1, inline);
            }
            unsignaledSwr[qp] = more;
            have = more;
        }
        return have;
    }

    /** The work-request id of request {@code index} on QP {@code qp}. */
    static long wrId(int qp, long index) {
        return ((long) qp << QP_SHIFT) | index;
    }

    /** Offset of QP {@code i}'s send half in the buffer. */
    long sendOffset(int i) {
        return 2L * i * slot;
    }

    /** Offset of QP {@code i}'s receive half in the buffer. */
    long recvOffset(int i) {
        return (2L * i + 1) * slot;
    }

    /** The address peers target: QP 0's receive half. */
    long localVaddr() {
        return localVaddr(0);
    }

    /** The address the peer's QP {@code i} targets: this side's QP {@code i} receive half. */
    long localVaddr(int i) {
        return mr.address() + base + recvOffset(i);
    }

    /** RESET→INIT of QP 0; returns its endpoint (call before exchanging). */
    QueuePairEndpoint init(int port, int gidIndex, int psn, boolean uc) {
        return init(0, port, gidIndex, psn, uc);
    }

    /** RESET→INIT of QP {@code i}; returns its endpoint (call before exchanging). */
    QueuePairEndpoint init(int i, int port, int gidIndex, int psn, boolean uc) {
        qps[i].toInit(
                port,
                uc
                        ? EnumSet.of(Access.REMOTE_WRITE)
                        : EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
        return qps[i].localEndpoint(gidIndex, psn);
    }

    /** INIT→RTR→RTS of QP 0 against the peer (and remembers the buffer it advertised). */
    void connect(QueuePairEndpoint local, QueuePairEndpoint remote, long remoteVaddr, int rkey, ConnectOptions o) {
        connect(0, local, remote, remoteVaddr, rkey, o);
    }

    /** INIT→RTR→RTS of QP {@code i} against the peer's QP {@code i} (and remembers its buffer). */
    void connect(
            int i, QueuePairEndpoint local, QueuePairEndpoint remote, long remoteVaddr, int rkey, ConnectOptions o) {
        qps[i].toRtr(remote, o);
        qps[i].toRts(local.psn(), o);
        target(i, remoteVaddr, rkey);
    }

    /** Remembers the buffer the peer advertised (rdma_cm: the QP is already connected). */
    void target(long remoteVaddr, int rkey) {
        target(0, remoteVaddr, rkey);
    }

    /** Remembers the buffer the peer's QP {@code i} advertised. */
    void target(int i, long remoteVaddr, int rkey) {
        remoteAddrs[i] = remoteVaddr;
        remoteKeys[i] = rkey;
        if (i == 0) {
            remoteAddr = remoteVaddr;
            remoteKey = rkey;
        }
    }

    /**
     * Starts a size: counters to zero, {@code total} receives to post per QP in all (unbounded in
     * duration mode: {@link Long#MAX_VALUE}), the first {@code depth} per QP now; {@code stamp}:
     * whether {@link #pollOnce} stamps receive completions ({@link #firstRecvNanos}).
     */
    void startReceives(long total, int depth, int length, boolean stamp) {
        recvsDone = 0;
        stampRecvs = stamp;
        recvsPosted = 0;
        recvLimit = total;
        firstRecvNanos = 0;
        lastRecvNanos = 0;
        recvLength = length;
        Arrays.fill(qpRecvsPosted, 0);
        long now = Math.min(total, depth);
        for (int q = 0; q < qps.length; q++) {
            for (long i = 0; i < now; i++) {
                postOneReceive(q);
            }
        }
    }

    private int recvLength;

    private void postOneReceive(int q) {
        // UD: the GRH lands udRecvShift bytes in, so that the payload is cache-line aligned (UdTransport)
        qps[q].postRecv(rwr.clear()
                .add(wrId(q, qpRecvsPosted[q]))
                .sge(mr, base + recvOffset(q) + udRecvShift, recvLength + udRecvExtra));
        qpRecvsPosted[q]++;
        recvsPosted++;
    }

    /**
     * Counters of sends to zero (before a run): total and per QP. {@code oneAtATime}: the latency
     * loops, which post one signaled request at a time and reuse its wr_id, so that each send
     * completion counts one; otherwise a completion counts up to its wr_id's index (cq_mod).
     */
    void resetSends(boolean oneAtATime) {
        countEachSend = oneAtATime;
        sendsDone = 0;
        Arrays.fill(qpSendsDone, 0);
        Arrays.fill(qpPosted, 0);
    }

    // ---- data path (allocation-free) -------------------------------------------------------

    /**
     * Polls once; throws on an error completion; counts signaled sends (by wr_id: index + 1 of
     * the newest) and receives (reposting one while fewer than the size's total were posted).
     * Returns how many completions it reaped.
     */
    int pollOnce() {
        int n = cq.poll(wcs);
        if (n == 0) {
            return 0;
        }
        // the clock only where a report needs it (bandwidth: each completion, as perftest); a
        // latency loop stamps its posts alone, as perftest's, and a read of the guest's clock
        // costs 170-320 ns under TCG (docs/benchmarking.md)
        long now = tcompleted != null || stampRecvs ? System.nanoTime() : 0;
        for (int i = 0; i < n; i++) {
            if (!wcs.isSuccess(i)) {
                throw new IllegalStateException("completion of wr_id " + wcs.wrId(i) + " failed: "
                        + wcs.statusText(i) + " (status " + wcs.status(i) + ", vendor error 0x"
                        + Integer.toHexString(wcs.vendorError(i)) + ")");
            }
            int op = wcs.opcode(i);
            long id = wcs.wrId(i);
            int q = (int) (id >>> QP_SHIFT);
            if (op == CompletionOpcode.RECV || op == CompletionOpcode.RECV_RDMA_WITH_IMM) {
                if (recvsDone++ == 0) {
                    firstRecvNanos = now;
                }
                lastRecvNanos = now;
                if (qpRecvsPosted[q] < recvLimit) {
                    postOneReceive(q);
                }
            } else {
                long before = qpSendsDone[q];
                long done = countEachSend ? before + 1 : (id & INDEX_MASK) + 1;
                if (done > before) {
                    qpSendsDone[q] = done;
                    sendsDone += done - before;
                    if (tcompleted != null) {
                        tcompleted[(int) sendsDone - 1] = now;
                    }
                }
            }
        }
        return n;
    }

    /** Busy-polls until {@link #sendsDone} reaches {@code target}; bounded by the timeout. */
    void awaitSends(long target) {
        long deadline = 0; // read the clock only once the wait is long (perftest reads none here)
        int spins = 0;
        while (sendsDone < target) {
            if (pollOnce() == 0 && (++spins & 0xff) == 0 && (deadline = expired(deadline)) == 0) {
                throw timeout("send completion #" + target + " (" + sendsDone + " completed)");
            }
        }
    }

    /**
     * The bound of a busy wait, started lazily: the first call (deadline 0) returns now + the
     * timeout, later ones return the deadline, or 0 once it passed. A wait that ends within its
     * first spins reads no clock: in a Soft-RoCE guest System.nanoTime is a ~1 µs system call
     * (clocksource hpet), where perftest's loops read the cycle counter or nothing.
     */
    private long expired(long deadline) {
        long now = System.nanoTime();
        if (deadline == 0) {
            return now + timeoutNanos | 1; // never 0
        }
        return now - deadline > 0 ? 0 : deadline;
    }

    /** Busy-polls until {@link #recvsDone} reaches {@code target}; bounded. */
    void awaitRecvs(long target) {
        long deadline = 0;
        int spins = 0;
        while (recvsDone < target) {
            if (pollOnce() == 0 && (++spins & 0xff) == 0 && (deadline = expired(deadline)) == 0) {
                throw timeout("receive #" + target + " (" + recvsDone + " received)");
            }
        }
    }

    /** Busy-waits until the peer's write put {@code marker} at {@code offset} of the receive half. */
    void awaitMarker(long offset, byte marker) {
        long deadline = 0;
        int spins = 0;
        while ((byte) BYTE.getAcquire(buffer, slot + offset) != marker) {
            if ((++spins & 0xfff) == 0 && (deadline = expired(deadline)) == 0) {
                throw timeout("RDMA WRITE of marker " + marker + " from the peer");
            }
        }
    }

    /** UD: gives the current request of {@code w} its destination (no-op on RC and UC). */
    void destination(SendWorkRequests w) {
        if (udAh != null) {
            w.destination(udAh, udRemoteQpn, UdTransport.QKEY);
        }
    }

    private IllegalStateException timeout(String what) {
        return new IllegalStateException("no " + what + " within " + timeoutNanos / 1_000_000_000L
                + " s (raise --timeout, or check the peer, its options and the link)");
    }

    @Override
    public void close() {
        wcs.close();
        rwr.close();
        swr.close();
        for (SendWorkRequests[] perQp : unsignaledSwr) {
            for (SendWorkRequests w : perQp) {
                w.close();
            }
        }
        if (udAh != null) {
            udAh.close();
        }
        if (releaseQp != null) {
            releaseQp.run();
        }
        for (QueuePair q : qps) {
            if (q.isOpen()) {
                q.close();
            }
        }
        buf.close();
        cq.close();
    }

    /** Posts {@code w} on {@code q}: {@code ibv_post_send}, or {@code ibv_wr_*} with {@link #extendedPost}. */
    void post(QueuePair q, SendWorkRequests w) {
        if (extendedPost) {
            q.postSendExtended(w);
        } else {
            q.postSend(w);
        }
    }
}
