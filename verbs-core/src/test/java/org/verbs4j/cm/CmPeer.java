package org.verbs4j.cm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicReference;
import org.verbs4j.Access;
import org.verbs4j.CompletionStatus;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.PeerJvm;

/**
 * The server of {@link TwoJvmGuestTest}, run in a second JVM: listens on {@code args[0]}:{@code
 * args[1]}, accepts one connection advertising its region (address and rkey in the accept's private
 * data), receives the client's SEND, RDMA WRITEs into the client's region (advertised in the
 * request's private data), SENDs back (the client then RDMA READs the server's region), then waits for the client's disconnect and checks that its
 * remaining receives flushed, each wr_id once. Prints LISTENING, then PEER OK; exits 0, or 1 with
 * the failure.
 */
public final class CmPeer {
    private CmPeer() {}

    static byte[] advertise(MemoryRegion mr) {
        return ByteBuffer.allocate(12).putLong(mr.address()).putInt(mr.rkey()).array();
    }

    public static void main(String[] args) {
        System.out.printf(
                "PEER main %d ms after the JVM started%n",
                ProcessHandle.current()
                        .info()
                        .startInstant()
                        .map(t -> java.time.Duration.between(t, java.time.Instant.now())
                                .toMillis())
                        .orElse(-1L));
        PeerJvm.exitAfter(() -> run(new InetSocketAddress(args[0], Integer.parseInt(args[1]))));
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static void run(InetSocketAddress at) {
        AtomicReference<MemoryRegion> mr = new AtomicReference<>();
        try (CmEventChannel ch = CmEventChannel.open();
                CmListener l = CmListener.bind(ch, at, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(4, 1);
                SendWorkRequests sends = new SendWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(8)) {
            System.out.println("LISTENING " + l.localAddress() + " "
                    + ProcessHandle.current()
                            .info()
                            .startInstant()
                            .map(t -> java.time.Duration.between(t, java.time.Instant.now())
                                    .toMillis())
                            .orElse(-1L)
                    + " ms after the JVM started");
            System.out.flush();
            ConnectionRequest r = l.accept(Duration.ofSeconds(60));
            ByteBuffer peer = ByteBuffer.wrap(r.privateData());
            long peerAddr = peer.getLong();
            int peerRkey = peer.getInt();
            ConnectionSetup setup = new ConnectionSetup()
                    .remoteAccess(EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ))
                    .beforeConnect(c -> {
                        MemoryRegion m = c.protectionDomain()
                                .allocateMemoryRegion(
                                        4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
                        mr.set(m);
                        recvs.clear()
                                .add(11)
                                .sge(m, 0, 256)
                                .add(12)
                                .sge(m, 256, 256)
                                .add(13)
                                .sge(m, 512, 256);
                        c.queuePair().postRecv(recvs);
                    });
            try (RdmaConnection c = acceptAdvertising(r, setup, mr)) {
                MemoryRegion m = mr.get();
                check(c.receiveCompletionQueue().poll(wcs, 1, Duration.ofSeconds(20)) == 1, "no SEND from the client");
                check(wcs.status(0) == CompletionStatus.SUCCESS && wcs.wrId(0) == 11, "receive: " + wcs.statusText(0));
                String ping = new String(
                        m.segment().asSlice(0, wcs.byteLength(0)).toArray(ValueLayout.JAVA_BYTE),
                        StandardCharsets.UTF_8);
                check(ping.equals("ping from the client"), "got " + ping);
                byte[] text = "written by the server".getBytes(StandardCharsets.UTF_8);
                MemorySegment.copy(text, 0, m.segment(), ValueLayout.JAVA_BYTE, 2048, text.length);
                sends.clear().write(1, peerAddr, peerRkey).sge(m, 2048, text.length);
                sends.send(2).sge(m, 2048, 4).signaled();
                c.queuePair().postSend(sends);
                check(c.sendCompletionQueue().poll(wcs, 1, Duration.ofSeconds(20)) == 1, "no send completion");
                check(wcs.status(0) == CompletionStatus.SUCCESS, "send: " + wcs.statusText(0));
                long t0 = System.nanoTime();
                check(c.awaitDisconnect(Duration.ofSeconds(30)), "no disconnect from the client: " + c.state());
                System.out.printf("PEER saw the disconnect after %.1f ms%n", (System.nanoTime() - t0) / 1e6);
                check(c.receiveCompletionQueue().poll(wcs, 2, Duration.ofSeconds(20)) == 2, "flushed receives");
                check(
                        wcs.status(0) == CompletionStatus.WR_FLUSH_ERR
                                && wcs.status(1) == CompletionStatus.WR_FLUSH_ERR,
                        "flush status " + wcs.statusText(0) + ", " + wcs.statusText(1));
                check(
                        wcs.wrId(0) + wcs.wrId(1) == 25 && wcs.wrId(0) != wcs.wrId(1),
                        "flushed wr_ids " + wcs.wrId(0) + ", " + wcs.wrId(1));
                check(c.receiveCompletionQueue().poll(wcs) == 0, "a receive completed twice");
                String written = new String(
                        m.segment().asSlice(1024, 21).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
                check(written.equals("written by the client"), "the client's RDMA WRITE: " + written);
                System.out.println("PEER flushed 12 and 13 once each; the client's write arrived");
            } finally {
                if (mr.get() != null) {
                    mr.get().close();
                }
            }
        }
    }

    /** Accepts with the region's address and rkey as private data (the region is made in the hook, before the accept). */
    private static RdmaConnection acceptAdvertising(
            ConnectionRequest r, ConnectionSetup setup, AtomicReference<MemoryRegion> mr) {
        byte[] data = new byte[12];
        ConnectionSetup s = setup.beforeConnect(hookThenAdvertise(setup, mr, data));
        return r.accept(s, data, Duration.ofSeconds(30));
    }

    private static java.util.function.Consumer<RdmaConnection> hookThenAdvertise(
            ConnectionSetup setup, AtomicReference<MemoryRegion> mr, byte[] data) {
        java.util.function.Consumer<RdmaConnection> hook = setup.beforeConnect;
        return c -> {
            hook.accept(c);
            System.arraycopy(advertise(mr.get()), 0, data, 0, 12);
        };
    }
}
