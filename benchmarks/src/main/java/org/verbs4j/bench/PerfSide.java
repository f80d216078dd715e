package org.verbs4j.bench;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.EnumSet;
import org.verbs4j.Access;
import org.verbs4j.CompletionOpcode;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.ConnectionData;
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
 * One side of a verbs-perf test: a CQ, an RC QP and ONE buffer registered once (before any
 * timing) and split into a send half and a receive half of {@link #slot} bytes each, with the
 * preallocated work-request chains and completion array that the timed loops reuse. Nothing in
 * the methods the loops call allocates.
 *
 * <p>The peer's buffer is known after {@link #connect}: {@link #remoteAddr}/{@link #remoteKey}
 * name the peer's whole buffer; the loops target its receive half ({@link #remoteRecv}).
 */
final class PerfSide implements AutoCloseable {
    static final VarHandle BYTE = JAVA_BYTE.varHandle();

    final String name;
    final CompletionQueue cq;
    final QueuePair qp;
    final Arena arena = Arena.ofShared();
    final MemorySegment buffer;
    final MemoryRegion mr;
    /** Bytes of each half: the largest message, rounded up to a page. */
    final long slot;
    final SendWorkRequests swr;
    final ReceiveWorkRequests rwr;
    final WorkCompletions wcs;
    final int recvDepth;
    /** Length of each receive reposted by {@link #pollOnce} (0: this side posts no receives). */
    final int repostSize;
    private final long timeoutNanos;

    long remoteAddr;
    int remoteKey;
    /** Signaled send WRs completed (bw tests: highest completed WR index + 1). */
    long sendsDone;
    /** Receive completions reaped (since the side was created). */
    long recvsDone;
    /** Latency tests: pings sent by this side so far (wr_id and marker of the next one). */
    long seq;
    /** The last completion's byte_len (receives). */
    int lastByteLen;

    PerfSide(String name, ProtectionDomain pd, int maxMessage, int sendDepth, int postList, int recvDepth,
             long timeoutNanos) {
        this.name = name;
        this.timeoutNanos = timeoutNanos;
        this.recvDepth = recvDepth;
        this.slot = Math.max(4096, (maxMessage + 4095L) & ~4095L);
        CompletionQueue c = null;
        QueuePair q = null;
        MemoryRegion m = null;
        try {
            c = pd.context().createCompletionQueue(sendDepth + recvDepth + 16);
            q = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, c).maxSendWr(sendDepth)
                    .maxRecvWr(Math.max(1, recvDepth)).maxSendSge(1).maxRecvSge(1));
            buffer = arena.allocate(2 * slot, 4096);
            m = pd.register(arena, buffer, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
        } catch (RuntimeException e) {
            for (AutoCloseable r : new AutoCloseable[] {m, q, c}) {
                if (r != null) {
                    try {
                        r.close();
                    } catch (Exception s) {
                        e.addSuppressed(s);
                    }
                }
            }
            arena.close();
            throw e;
        }
        this.cq = c;
        this.qp = q;
        this.mr = m;
        this.swr = new SendWorkRequests(Math.max(1, postList), 1);
        this.rwr = new ReceiveWorkRequests(Math.max(1, recvDepth), 1);
        this.wcs = new WorkCompletions(64);
        this.repostSize = recvDepth > 0 ? (int) slot : 0;
    }

    /** Offset of the receive half in {@link #buffer}. */
    long recvOffset() {
        return slot;
    }

    /** The peer's receive half. */
    long remoteRecv() {
        return remoteAddr + slot;
    }

    /** RESET→INIT; returns this side's endpoint (call before exchanging). */
    QueuePairEndpoint init(int port, int gidIndex, int psn) {
        qp.toInit(port, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ));
        return qp.localEndpoint(gidIndex, psn);
    }

    /** INIT→RTR→RTS against the peer's data (and remembers the peer's buffer). */
    void connect(QueuePairEndpoint local, ConnectionData remote, ConnectOptions o) {
        qp.toRtr(remote.endpoint(), o);
        qp.toRts(local.psn(), o);
        remoteAddr = remote.bufferAddress();
        remoteKey = remote.rkey();
    }

    ConnectionData connectionData(QueuePairEndpoint local) {
        return ConnectionData.of(local, mr);
    }

    // ---- data path (allocation-free) -------------------------------------------------------

    /** Posts {@code count} receives of {@code size} bytes into the receive half. */
    void postReceives(int count, int size) {
        ReceiveWorkRequests r = rwr.clear();
        for (int i = 0; i < count; i++) {
            r.add(i).sge(mr, slot, size);
        }
        qp.postRecv(r);
    }

    /**
     * Polls once; throws on an error completion; counts signaled sends (by wr_id: index + 1 of
     * the newest) and receives (reposting one receive of {@link #repostSize} bytes for each when
     * this side posts receives). Returns how many completions it reaped.
     */
    int pollOnce() {
        int n = cq.poll(wcs);
        for (int i = 0; i < n; i++) {
            if (!wcs.isSuccess(i)) {
                throw new IllegalStateException(name + ": completion of wr_id " + wcs.wrId(i) + " failed: "
                        + wcs.statusText(i) + " (status " + wcs.status(i) + ", vendor error 0x"
                        + Integer.toHexString(wcs.vendorError(i)) + ")");
            }
            int op = wcs.opcode(i);
            if (op == CompletionOpcode.RECV || op == CompletionOpcode.RECV_RDMA_WITH_IMM) {
                recvsDone++;
                lastByteLen = wcs.byteLength(i);
                if (repostSize > 0) {
                    qp.postRecv(rwr.clear().add(recvsDone).sge(mr, slot, repostSize));
                }
            } else {
                long done = wcs.wrId(i) + 1;
                if (done > sendsDone) {
                    sendsDone = done;
                }
            }
        }
        return n;
    }

    /** Busy-polls until {@link #sendsDone} reaches {@code target}; bounded by the timeout. */
    void awaitSends(long target) {
        long deadline = System.nanoTime() + timeoutNanos;
        while (sendsDone < target) {
            if (pollOnce() == 0) {
                if (System.nanoTime() - deadline > 0) {
                    throw timeout("send completion #" + target + " (" + sendsDone + " completed)");
                }
            } else {
                deadline = System.nanoTime() + timeoutNanos;
            }
        }
    }

    /** Busy-polls until {@link #recvsDone} reaches {@code target}, reposting receives; bounded. */
    void awaitRecvs(long target) {
        long deadline = System.nanoTime() + timeoutNanos;
        while (recvsDone < target) {
            if (pollOnce() == 0 && System.nanoTime() - deadline > 0) {
                throw timeout("receive #" + target + " (" + recvsDone + " received)");
            }
        }
    }

    /** The last byte of the receive half's message of {@code size} bytes (acquire read). */
    byte recvMarker(int size) {
        return (byte) BYTE.getAcquire(buffer, slot + size - 1);
    }

    /** Sets the last byte of the send half's message of {@code size} bytes. */
    void setSendMarker(int size, byte marker) {
        BYTE.setRelease(buffer, (long) size - 1, marker);
    }

    /** Busy-waits (reaping send completions) until the peer's write put {@code marker} in the receive half. */
    void awaitMarker(int size, byte marker) {
        long deadline = System.nanoTime() + timeoutNanos;
        int spins = 0;
        while (recvMarker(size) != marker) {
            pollOnce();
            if ((++spins & 0xff) == 0 && System.nanoTime() - deadline > 0) {
                throw timeout("the peer's RDMA WRITE of marker " + marker);
            }
        }
    }

    private IllegalStateException timeout(String what) {
        return new IllegalStateException(name + ": no " + what + " within " + timeoutNanos / 1_000_000_000L
                + " s (raise --timeout, or check the peer and the link)");
    }

    @Override
    public void close() {
        wcs.close();
        rwr.close();
        swr.close();
        qp.close();
        mr.close();
        cq.close();
        arena.close();
    }
}
