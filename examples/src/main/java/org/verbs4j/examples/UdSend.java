package org.verbs4j.examples;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.verbs4j.Access;
import org.verbs4j.AddressHandle;
import org.verbs4j.AddressVector;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.GidEntry;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * Unreliable datagrams: no connection. A UD queue pair becomes ready on its own
 * ({@code activateUd}); each SEND names its destination (an {@link AddressHandle} for the route, the
 * remote QP number and its Q_Key). On RoCE every received datagram starts with a 40-byte Global
 * Route Header, so a receive buffer must be 40 bytes longer than the largest message.
 */
public final class UdSend {
    private static final int QKEY = 0x11111111;
    private static final int GRH = 40;
    private static final int SLOT = GRH + 256;

    private UdSend() {}

    /** Runs the example; {@code examples/run ud}. */
    public static void main(String[] args) {
        run(System.out);
    }

    /** Runs the example, printing what it proves to {@code out}. */
    public static void run(PrintStream out) {
        String[] messages = {"first datagram", "second datagram", "third, a little longer datagram"};
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cqS = ctx.createCompletionQueue(16);
                CompletionQueue cqR = ctx.createCompletionQueue(16);
                MemoryRegion sendBuf = pd.allocateMemoryRegion(SLOT * messages.length);
                MemoryRegion recvBuf = pd.allocateMemoryRegion(SLOT * messages.length, Access.LOCAL_WRITE);
                QueuePair sender = pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.UD, cqS).maxSendWr(8).maxRecvWr(8));
                QueuePair receiver = pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.UD, cqR).maxSendWr(8).maxRecvWr(8));
                SendWorkRequests sends = new SendWorkRequests(messages.length, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(messages.length, 1);
                WorkCompletions wcs = new WorkCompletions(8)) {
            sender.activateUd(1, QKEY, 0);
            receiver.activateUd(1, QKEY, 0);
            out.println("UD queue pairs ready without connecting: " + sender + ", " + receiver);

            // receives first, each with room for the GRH
            recvs.clear();
            for (int i = 0; i < messages.length; i++) {
                recvs.add(100 + i).sge(recvBuf, (long) SLOT * i, SLOT);
            }
            receiver.postRecv(recvs);

            // the route to the receiver: its port's GID (here our own; from another machine, the
            // GID it sent you) and our GID index to send from
            GidEntry gid = Setup.gid(ctx);
            try (AddressHandle ah = pd.createAddressHandle(AddressVector.global(1, gid.gid(), gid.index()))) {
                out.println("address handle: " + ah);
                sends.clear();
                for (int i = 0; i < messages.length; i++) {
                    byte[] m = messages[i].getBytes(StandardCharsets.UTF_8);
                    sendBuf.segment()
                            .asSlice((long) SLOT * i, m.length)
                            .copyFrom(java.lang.foreign.MemorySegment.ofArray(m));
                    sends.send(200 + i)
                            .sge(sendBuf, (long) SLOT * i, m.length)
                            .destination(ah, receiver.qpNumber(), QKEY)
                            .signaled();
                }
                sender.postSend(sends);
                Setup.await(cqS, wcs, messages.length);
                Setup.await(cqR, wcs, messages.length);
                for (int i = 0; i < messages.length; i++) {
                    int slot = (int) (wcs.wrId(i) - 100);
                    int len = wcs.byteLength(i) - GRH;
                    String got = new String(
                            recvBuf.segment()
                                    .asSlice((long) SLOT * slot + GRH, len)
                                    .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                            StandardCharsets.UTF_8);
                    WriteAndRead.check(got.equals(messages[i]), "datagram " + i + " is '" + got + "'");
                    WriteAndRead.check(wcs.sourceQp(i) == sender.qpNumber(), "source QP " + wcs.sourceQp(i));
                    out.println("received datagram " + i + " from QP " + wcs.sourceQp(i) + ": " + GRH + "-byte GRH + "
                            + len + " bytes \"" + got + "\"");
                }
            }
            out.println("UD: " + messages.length + " datagrams sent through one address handle, received in order");
        }
    }
}
