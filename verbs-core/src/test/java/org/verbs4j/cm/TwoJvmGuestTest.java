package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.poll;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.CompletionStatus;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.PeerJvm;
import org.verbs4j.testing.RdmaTest;

/**
 * Two JVMs on rxe0: {@link CmPeer} serves in a second JVM (same class path, started with
 * ProcessBuilder, bounded); this JVM connects with its region in the request's private data,
 * SENDs, RDMA WRITEs, receives the peer's RDMA WRITE and SEND, RDMA READs the peer's region, then disconnects: the peer sees the
 * disconnect within a bound and its posted receives flush, each wr_id once (it checks and says so).
 * The protection domain is the caller's, allocated on the device librdmacm uses for the address.
 */
@RdmaTest
class TwoJvmGuestTest {
    @Test
    void twoJvmsConnectSendWriteAndDisconnect() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        int port = CmTestSupport.port();
        String ip = CmTestSupport.ip().getHostAddress();
        // C1 only: a short-lived peer starts several times faster under TCG
        try (PeerJvm peer = new PeerJvm(
                CmPeer.class, List.of("-XX:TieredStopAtLevel=1", "-Xshare:auto"), ip, Integer.toString(port))) {
            long t0 = System.nanoTime();
            peer.awaitLine("LISTENING", 90);
            System.out.printf("TwoJvmGuestTest: the peer JVM listened after %.1f s%n", (System.nanoTime() - t0) / 1e9);
            try (CmEventChannel ch = CmEventChannel.open();
                    ReceiveWorkRequests recvs = new ReceiveWorkRequests(2, 1);
                    SendWorkRequests sends = new SendWorkRequests(2, 1);
                    WorkCompletions wcs = new WorkCompletions(4)) {
                Context ctx = ch.deviceContext(CmTestSupport.ip());
                try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                        MemoryRegion mr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                    byte[] mine = ByteBuffer.allocate(12)
                            .putLong(mr.address())
                            .putInt(mr.rkey())
                            .array();
                    ConnectionSetup setup = new ConnectionSetup()
                            .protectionDomain(pd)
                            .remoteAccess(EnumSet.of(Access.REMOTE_WRITE))
                            .beforeConnect(c -> {
                                recvs.clear().add(21).sge(mr, 0, 256).add(22).sge(mr, 256, 256);
                                c.queuePair().postRecv(recvs);
                            });
                    try (RdmaConnection c =
                            RdmaConnection.connect(ch, new InetSocketAddress(ip, port), setup, mine, WAIT)) {
                        assertTrue(c.protectionDomain() == pd, "the caller's PD");
                        ByteBuffer theirs = ByteBuffer.wrap(c.peerPrivateData());
                        long peerAddr = theirs.getLong();
                        int peerRkey = theirs.getInt();
                        byte[] ping = "ping from the client".getBytes(StandardCharsets.UTF_8);
                        byte[] text = "written by the client".getBytes(StandardCharsets.UTF_8);
                        MemorySegment.copy(ping, 0, mr.segment(), ValueLayout.JAVA_BYTE, 3072, ping.length);
                        MemorySegment.copy(text, 0, mr.segment(), ValueLayout.JAVA_BYTE, 3584, text.length);
                        sends.clear().write(1, peerAddr + 1024, peerRkey).sge(mr, 3584, text.length);
                        sends.send(2).sge(mr, 3072, ping.length).signaled();
                        c.queuePair().postSend(sends);
                        poll(c.sendCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        poll(c.receiveCompletionQueue(), wcs, 1); // the peer's SEND, after its WRITE
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        assertEquals(21, wcs.wrId(0));
                        assertEquals(
                                "written by the server",
                                new String(
                                        mr.segment()
                                                .asSlice(peerWriteOffset(), 21)
                                                .toArray(ValueLayout.JAVA_BYTE),
                                        StandardCharsets.UTF_8));
                        // RDMA READ of the peer's region (where it staged its text)
                        mr.segment().asSlice(1024, 21).fill((byte) 0);
                        sends.clear()
                                .read(3, peerAddr + 2048, peerRkey)
                                .sge(mr, 1024, 21)
                                .signaled();
                        c.queuePair().postSend(sends);
                        poll(c.sendCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        assertEquals(
                                "written by the server",
                                new String(
                                        mr.segment().asSlice(1024, 21).toArray(ValueLayout.JAVA_BYTE),
                                        StandardCharsets.UTF_8),
                                "what the RDMA READ brought");
                        c.disconnect();
                        poll(c.receiveCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.WR_FLUSH_ERR, wcs.status(0));
                        assertEquals(22, wcs.wrId(0));
                    }
                }
            }
            List<String> all = peer.awaitSuccess(60);
            System.out.println("TwoJvmGuestTest: the peer said:\n  " + String.join("\n  ", all));
        }
        assertEquals(before, CmTestSupport.leakCounts());
    }

    /** The peer writes at offset 0 of the address we advertised. */
    private static long peerWriteOffset() {
        return 0;
    }
}
