package org.verbs4j.bench.perf;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
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
 * One side of a verbs-perf test: a CQ, an RC, UC or UD QP and ONE buffer from the
 * {@link BufferProvider}, registered once before any timing, laid out as perftest lays out its
 * own: a send half ({@code [0, slot)}) and a receive half ({@code [slot, 2 slot)}) whose address
 * is what the peer is told ({@link #localVaddr}), so that a perftest peer's writes land where
 * this side polls and the other way round. The work-request chains and the completion array are
 * preallocated: the methods the timed loops call allocate nothing. One thread.
 */
final class PerfSide implements AutoCloseable {
    static final VarHandle BYTE = JAVA_BYTE.varHandle();

    final CompletionQueue cq;
    final QueuePair qp;
    final BufferProvider.PerfBuffer buf;
    final MemorySegment buffer;
    final MemoryRegion mr;
    /** Bytes of each half: max(cycle buffer, largest message), rounded up to a page. */
    final long slot;
    /** Where the buffer starts in {@link #mr}: every SGE offset adds it. */
    final long base;
    final SendWorkRequests swr;
    final ReceiveWorkRequests rwr;
    final WorkCompletions wcs;
    private final long timeoutNanos;
    /** Where the QP came from when not from {@code pd} (rdma_cm): closes it before the CQ and buffer go. */
    private final Runnable releaseQp;

    long remoteAddr;
    int remoteKey;
    /** Signaled send WRs completed: index + 1 of the newest completed one. */
    long sendsDone;
    /** Receive completions reaped (reset per size). */
    long recvsDone;
    /** Receives posted (reset per size) and the total to post for this size. */
    long recvsPosted;
    long recvLimit;
    /** Nanos of the first and last receive completion of a size. */
    long firstRecvNanos;
    long lastRecvNanos;
    /** When set (bandwidth client), {@code tcompleted[done - 1]} is stamped at each send completion. */
    long[] tcompleted;
    /** UD ({@link UdTransport}): the destination of sends (null otherwise), closed with this side. */
    AddressHandle udAh;
    /** UD: the peer's QP number. */
    int udRemoteQpn;
    /** UD: where receives start in the receive half, and the bytes they add to the message (the GRH). */
    long udRecvShift;
    int udRecvExtra;

    PerfSide(ProtectionDomain pd, BufferProvider provider, QueuePairType type, int maxMessage, int cycleBuffer,
             int sendDepth, int postList, int recvDepth, int inline, long timeoutNanos) {
        this(pd, provider, type, maxMessage, cycleBuffer, sendDepth, postList, recvDepth, inline, timeoutNanos, null, null);
    }

    /**
     * As above, but the QP comes from {@code qpSource} (given the CQ and the init this side would
     * use; rdma_cm's connected QP) and {@code releaseQp} closes it.
     */
    PerfSide(ProtectionDomain pd, BufferProvider provider, QueuePairType type, int maxMessage, int cycleBuffer,
             int sendDepth, int postList, int recvDepth, int inline, long timeoutNanos,
             java.util.function.BiFunction<CompletionQueue, QueuePairInit, QueuePair> qpSource, Runnable releaseQp) {
        this.timeoutNanos = timeoutNanos;
        this.releaseQp = releaseQp;
        long s = Math.max(cycleBuffer, maxMessage);
        this.slot = Math.max(4096, (s + 4095L) & ~4095L);
        CompletionQueue c = null;
        QueuePair q = null;
        BufferProvider.PerfBuffer b = null;
        try {
            c = pd.context().createCompletionQueue(sendDepth + recvDepth + 16);
            QueuePairInit init = QueuePairInit.of(type, c).maxSendWr(sendDepth)
                    .maxRecvWr(Math.max(1, recvDepth)).maxSendSge(1).maxRecvSge(1);
            if (inline > 0) {
                init = init.maxInlineData(inline);
            }
            q = qpSource == null ? pd.createQueuePair(init) : qpSource.apply(c, init);
            b = provider.allocate(pd, 2 * slot, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                    Access.REMOTE_READ, Access.REMOTE_ATOMIC));
        } catch (RuntimeException e) {
            if (releaseQp != null) {
                releaseQp.run();
                q = null;
            }
            for (AutoCloseable r : new AutoCloseable[] {b, q, c}) {
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
        this.qp = q;
        this.buf = b;
        this.buffer = b.segment();
        this.mr = b.region();
        this.base = b.offset();
        this.swr = new SendWorkRequests(Math.max(1, postList), 1, inline);
        this.rwr = new ReceiveWorkRequests(1, 1);
        this.wcs = new WorkCompletions(64);
    }

    /** The address peers target: this side's receive half. */
    long localVaddr() {
        return mr.address() + base + slot;
    }

    /** RESET→INIT; returns this side's endpoint (call before exchanging). */
    QueuePairEndpoint init(int port, int gidIndex, int psn, boolean uc) {
        qp.toInit(port, uc ? EnumSet.of(Access.REMOTE_WRITE)
                : EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
        return qp.localEndpoint(gidIndex, psn);
    }

    /** INIT→RTR→RTS against the peer (and remembers the buffer it advertised). */
    void connect(QueuePairEndpoint local, QueuePairEndpoint remote, long remoteVaddr, int rkey, ConnectOptions o) {
        qp.toRtr(remote, o);
        qp.toRts(local.psn(), o);
        remoteAddr = remoteVaddr;
        remoteKey = rkey;
    }

    /** Remembers the buffer the peer advertised (rdma_cm: the QP is already connected). */
    void target(long remoteVaddr, int rkey) {
        remoteAddr = remoteVaddr;
        remoteKey = rkey;
    }

    /** Starts a size: counters to zero, {@code total} receives to post in all, the first {@code depth} now. */
    void startReceives(long total, int depth, int length) {
        recvsDone = 0;
        recvsPosted = 0;
        recvLimit = total;
        firstRecvNanos = 0;
        lastRecvNanos = 0;
        long now = Math.min(total, depth);
        for (long i = 0; i < now; i++) {
            postOneReceive(length);
        }
    }

    private int recvLength;

    private void postOneReceive(int length) {
        recvLength = length;
        qp.postRecv(rwr.clear().add(recvsPosted).sge(mr, base + slot + udRecvShift, length + udRecvExtra));
        recvsPosted++;
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
        long now = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (!wcs.isSuccess(i)) {
                throw new IllegalStateException("completion of wr_id " + wcs.wrId(i) + " failed: "
                        + wcs.statusText(i) + " (status " + wcs.status(i) + ", vendor error 0x"
                        + Integer.toHexString(wcs.vendorError(i)) + ")");
            }
            int op = wcs.opcode(i);
            if (op == CompletionOpcode.RECV || op == CompletionOpcode.RECV_RDMA_WITH_IMM) {
                if (recvsDone++ == 0) {
                    firstRecvNanos = now;
                }
                lastRecvNanos = now;
                if (recvsPosted < recvLimit) {
                    postOneReceive(recvLength);
                }
            } else {
                long done = wcs.wrId(i) + 1;
                if (done > sendsDone) {
                    sendsDone = done;
                    if (tcompleted != null) {
                        tcompleted[(int) done - 1] = now;
                    }
                }
            }
        }
        return n;
    }

    /** Busy-polls until {@link #sendsDone} reaches {@code target}; bounded by the timeout. */
    void awaitSends(long target) {
        long deadline = System.nanoTime() + timeoutNanos;
        int spins = 0;
        while (sendsDone < target) {
            if (pollOnce() == 0 && (++spins & 0xff) == 0 && System.nanoTime() - deadline > 0) {
                throw timeout("send completion #" + target + " (" + sendsDone + " completed)");
            }
        }
    }

    /** Busy-polls until {@link #recvsDone} reaches {@code target}; bounded. */
    void awaitRecvs(long target) {
        long deadline = System.nanoTime() + timeoutNanos;
        int spins = 0;
        while (recvsDone < target) {
            if (pollOnce() == 0 && (++spins & 0xff) == 0 && System.nanoTime() - deadline > 0) {
                throw timeout("receive #" + target + " (" + recvsDone + " received)");
            }
        }
    }

    /** Busy-waits until the peer's write put {@code marker} at {@code offset} of the receive half. */
    void awaitMarker(long offset, byte marker) {
        long deadline = System.nanoTime() + timeoutNanos;
        int spins = 0;
        while ((byte) BYTE.getAcquire(buffer, slot + offset) != marker) {
            if ((++spins & 0xfff) == 0 && System.nanoTime() - deadline > 0) {
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

    /** Sets a byte of the send half. */
    void setSendByte(long offset, byte value) {
        BYTE.setRelease(buffer, offset, value);
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
        if (udAh != null) {
            udAh.close();
        }
        if (releaseQp != null) {
            releaseQp.run();
        }
        if (qp.isOpen()) {
            qp.close();
        }
        buf.close();
        cq.close();
    }
}
