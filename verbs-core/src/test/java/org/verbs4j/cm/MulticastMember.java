package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * One UD queue pair of the multicast tests, receiving or sending {@link #datagram datagrams} of
 * distinct known content: its own completion queue, a region of {@code n} slots, and (for a
 * receiver) {@code n} receives posted, one slot each, before the group is joined.
 */
final class MulticastMember implements AutoCloseable {
    /** The GRH (RoCE v2 over IPv4: 20 zero bytes and the IPv4 header) before each UD payload. */
    static final int GRH = 40;
    /** Payload bytes of each datagram (within rxe's 1024-byte UD MTU). */
    static final int LENGTH = 200;

    private static final int SLOT = GRH + LENGTH;

    final CompletionQueue cq;
    final QueuePair qp;
    final MemoryRegion mr;
    private final int n;

    MulticastMember(ProtectionDomain pd, int n, boolean postReceives) {
        this.n = n;
        cq = pd.context().createCompletionQueue(2 * n);
        qp = pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cq)
                .maxSendWr(n)
                .maxRecvWr(n)
                .maxSendSge(1)
                .maxRecvSge(1));
        qp.activateUd(1, MulticastGroup.QKEY, 0);
        mr = pd.allocateMemoryRegion((long) n * SLOT, Access.LOCAL_WRITE);
        if (postReceives) {
            try (ReceiveWorkRequests recvs = new ReceiveWorkRequests(n, 1)) {
                for (int i = 0; i < n; i++) {
                    recvs.add(i).sge(mr, (long) i * SLOT, SLOT);
                }
                qp.postRecv(recvs);
            }
        } else {
            for (int i = 0; i < n; i++) {
                mr.segment()
                        .asSlice((long) i * SLOT, LENGTH)
                        .copyFrom(java.lang.foreign.MemorySegment.ofArray(datagram(i)));
            }
        }
    }

    /** The offset of datagram {@code i} in a sender's region. */
    static long offset(int i) {
        return (long) i * SLOT;
    }

    /** Datagram {@code i}: its number in words, then bytes that depend on {@code i} and the position. */
    static byte[] datagram(int i) {
        byte[] d = new byte[LENGTH];
        byte[] head = ("multicast datagram " + i).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(head, 0, d, 0, head.length);
        for (int j = head.length; j < LENGTH; j++) {
            d[j] = (byte) (i * 31 + j * 7);
        }
        return d;
    }

    /**
     * Reaps the {@code n} receives within {@code bound} and checks each: success, the GRH plus
     * {@link #LENGTH} bytes, sent by {@code senderQpn}, and receive {@code i} (posted i-th, so
     * filled i-th) holds datagram {@code i} byte for byte: every datagram, in the order sent.
     */
    void expectAll(int senderQpn, Duration bound) {
        try (WorkCompletions wcs = new WorkCompletions(n)) {
            int got = cq.poll(wcs, n, bound);
            assertEquals(n, got, "datagrams received within " + bound);
            for (int k = 0; k < n; k++) {
                assertTrue(wcs.isSuccess(k), "receive " + k + ": status " + wcs.status(k));
                int i = (int) wcs.wrId(k);
                assertEquals(k, i, "receives complete in the order posted");
                assertEquals(GRH + LENGTH, wcs.byteLength(k), "datagram " + i + ": GRH + payload");
                assertEquals(senderQpn, wcs.sourceQp(k), "datagram " + i + ": the sender's QPN");
                byte[] got1 =
                        mr.segment().asSlice((long) i * SLOT + GRH, LENGTH).toArray(ValueLayout.JAVA_BYTE);
                assertArrayEquals(datagram(i), got1, "datagram " + i + " byte for byte");
            }
        }
    }

    @Override
    public void close() {
        qp.close();
        mr.close();
        cq.close();
    }
}
