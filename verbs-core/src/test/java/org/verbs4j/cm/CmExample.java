package org.verbs4j.cm;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicReference;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * The example of docs/rdma-cm.md, compiled with the tests so that it stays true to the API
 * ({@link TwoJvmGuestTest} runs the same flow, with checks, in two JVMs): {@code server} in one
 * process, {@code client} in another.
 */
final class CmExample {
    private CmExample() {}

    static void server() {
        try (CmEventChannel ch = CmEventChannel.open();
                CmListener listener = CmListener.bind(ch, new InetSocketAddress("10.0.0.1", 7471), 8);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            ConnectionRequest request = listener.accept(Duration.ofSeconds(60));
            AtomicReference<MemoryRegion> region = new AtomicReference<>();
            byte[] advert = new byte[12]; // filled once the region exists
            ConnectionSetup setup = new ConnectionSetup()
                    .remoteAccess(EnumSet.of(Access.REMOTE_READ)) // least privilege: only what is needed
                    .beforeConnect(
                            c -> { // the QP exists; the accept has not gone out
                                MemoryRegion mr = c.protectionDomain()
                                        .allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_READ);
                                region.set(mr);
                                mr.segment().setString(2048, "the server's memory");
                                c.queuePair()
                                        .postRecv(recvs.clear().add(1).sge(mr, 0, 256)); // before the client can send
                                ByteBuffer.wrap(advert).putLong(mr.address()).putInt(mr.rkey());
                            });
            try (RdmaConnection c = request.accept(setup, advert, Duration.ofSeconds(20))) {
                c.receiveCompletionQueue().poll(wcs, 1, Duration.ofSeconds(20)); // the client's message
                System.out.println(region.get().segment().getString(0));
                c.awaitDisconnect(Duration.ofSeconds(60)); // the client is done
            } finally {
                region.get().close();
            }
        }
    }

    static void client() {
        try (CmEventChannel ch = CmEventChannel.open();
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                RdmaConnection c = RdmaConnection.connect(
                        ch, "10.0.0.1", 7471, new ConnectionSetup(), null, Duration.ofSeconds(20));
                MemoryRegion mr = c.protectionDomain().allocateMemoryRegion(4096, Access.LOCAL_WRITE)) {
            ByteBuffer advert = ByteBuffer.wrap(c.peerPrivateData());
            long remote = advert.getLong();
            int rkey = advert.getInt();
            mr.segment().setString(0, "hello over RDMA");
            c.queuePair().postSend(wrs.clear().send(1).sge(mr, 0, 16).signaled()); // a message
            c.sendCompletionQueue().poll(wcs, 1, Duration.ofSeconds(20));
            c.queuePair()
                    .postSend(wrs.clear()
                            .read(2, remote + 2048, rkey)
                            .sge(mr, 1024, 20)
                            .signaled()); // a remote read
            c.sendCompletionQueue().poll(wcs, 1, Duration.ofSeconds(20));
            System.out.println(mr.segment().getString(1024)); // "the server's memory"
            c.disconnect();
        }
    }
}
