package org.verbs4j.examples;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.verbs4j.Access;
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
import org.verbs4j.SharedReceiveQueue;
import org.verbs4j.WorkCompletions;

/**
 * A shared receive queue: one pool of receive buffers for several queue pairs, so a server with
 * many connections does not post (and pin memory for) receives per connection. Three clients
 * send to three server queue pairs that all take their receives from one SRQ; each completion
 * names the queue pair that received. Receives go to the SRQ, never to its queue pairs.
 */
public final class SharedReceive {
    private static final int QPS = 3;
    private static final int BUFFERS = 8;
    private static final int SLOT = 256;

    private SharedReceive() {}

    /** Runs the example; {@code examples/run srq}. */
    public static void main(String[] args) {
        run(System.out);
    }

    /** Runs the example, printing what it proves to {@code out}. */
    public static void run(PrintStream out) {
        List<QueuePair> clients = new ArrayList<>();
        List<QueuePair> servers = new ArrayList<>();
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cqClients = ctx.createCompletionQueue(16);
                CompletionQueue cqServers = ctx.createCompletionQueue(16);
                SharedReceiveQueue srq = pd.createSharedReceiveQueue(BUFFERS, 1);
                MemoryRegion sendBuf = pd.allocateMemoryRegion(SLOT * QPS);
                MemoryRegion recvBuf = pd.allocateMemoryRegion(SLOT * BUFFERS, Access.LOCAL_WRITE);
                SendWorkRequests sends = new SendWorkRequests(1, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(BUFFERS, 1);
                WorkCompletions wcs = new WorkCompletions(16)) {
            try {
                GidEntry gid = Setup.gid(ctx);
                for (int i = 0; i < QPS; i++) {
                    servers.add(pd.createQueuePair(
                            QueuePairInit.of(QueuePairType.RC, cqServers).sharedReceiveQueue(srq)));
                    clients.add(pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqClients)));
                    Setup.connect(clients.get(i), servers.get(i), gid, Set.of());
                }
                out.println(srq + " serves " + servers);

                recvs.clear();
                for (int i = 0; i < BUFFERS; i++) {
                    recvs.add(i).sge(recvBuf, (long) SLOT * i, SLOT);
                }
                srq.postRecv(recvs);
                out.println("posted " + BUFFERS + " receive buffers to the SRQ, none to any queue pair");

                for (int i = 0; i < QPS; i++) {
                    sendBuf.segment().asSlice((long) SLOT * i, 100).fill((byte) ('a' + i));
                    clients.get(i)
                            .postSend(sends.clear()
                                    .send(i)
                                    .sge(sendBuf, (long) SLOT * i, 100 + i)
                                    .signaled());
                }
                Setup.await(cqClients, wcs, QPS);
                Setup.await(cqServers, wcs, QPS);
                boolean[] seen = new boolean[QPS];
                for (int k = 0; k < QPS; k++) {
                    int server = -1;
                    for (int i = 0; i < QPS; i++) {
                        if (servers.get(i).qpNumber() == wcs.qpNumber(k)) {
                            server = i;
                        }
                    }
                    WriteAndRead.check(server >= 0, "a completion names QP " + wcs.qpNumber(k));
                    long buffer = wcs.wrId(k);
                    byte first = recvBuf.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, SLOT * buffer);
                    WriteAndRead.check(
                            first == 'a' + server && wcs.byteLength(k) == 100 + server,
                            "server QP " + server + " received the wrong message");
                    seen[server] = true;
                    out.println("server QP " + wcs.qpNumber(k) + " received " + wcs.byteLength(k) + " bytes of '"
                            + (char) first + "' into SRQ buffer " + buffer);
                }
                WriteAndRead.check(seen[0] && seen[1] && seen[2], "not every queue pair received");
                out.println("SRQ: " + QPS + " queue pairs, " + QPS + " messages, one shared pool of " + BUFFERS
                        + " receive buffers (" + (BUFFERS - QPS) + " still posted)");
            } finally {
                for (int i = servers.size() - 1; i >= 0; i--) {
                    servers.get(i).close();
                }
                for (int i = clients.size() - 1; i >= 0; i--) {
                    clients.get(i).close();
                }
            }
        }
    }
}
