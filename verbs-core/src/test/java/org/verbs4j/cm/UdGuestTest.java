package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.address;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.AddressHandle;
import org.verbs4j.AddressVector;
import org.verbs4j.Gid;
import org.verbs4j.MemoryRegion;
import org.verbs4j.QueuePairState;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTest;

/**
 * UD over rdma_cm (RDMA_PS_UDP) on rxe0: a UD listener accepts a connectUd with its QPN and Q_Key;
 * the active side gets them with an address handle from the ESTABLISHED event and SENDs; the
 * passive side receives (40-byte GRH first: the sender's GID and QPN are what it answers to) and
 * SENDs back through an address handle it built from that GRH. Private data each way; counts back.
 */
@RdmaTest
class UdGuestTest {
    private static final int GRH = 40;

    /**
     * The sender's GID from the 40 bytes before a UD payload: a GRH (source GID at 8), or for RoCE v2
     * over IPv4 20 zero bytes and the IPv4 header (source address at 32), as the verbs spec lays it out.
     */
    static Gid sourceGid(java.lang.foreign.MemorySegment buf) throws java.net.UnknownHostException {
        boolean ipv4 = true;
        for (int i = 0; i < 20; i++) {
            ipv4 &= buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) == 0;
        }
        if (!ipv4) {
            return Gid.read(buf, 8);
        }
        assertEquals(
                0x45,
                buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 20) & 0xff,
                "an IPv4 header after 20 zero bytes");
        byte[] src = buf.asSlice(32, 4).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        return Gid.ofAddress(java.net.InetAddress.getByAddress(src));
    }

    @Test
    void aUdSendEachWayThroughTheConnectionManager() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        int port = CmTestSupport.port();
        byte[] toClient = CmTestSupport.bytes("server here");
        byte[] toServer = CmTestSupport.bytes("client here");
        try (CmEventChannel sch = CmEventChannel.open();
                CmEventChannel cch = CmEventChannel.open();
                CmListener l = CmListener.bindUd(sch, address(port), 4);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
                ReceiveWorkRequests recvc = new ReceiveWorkRequests(1, 1);
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            AtomicReference<MemoryRegion> smr = new AtomicReference<>();
            AtomicReference<MemoryRegion> cmr = new AtomicReference<>();
            CompletableFuture<RdmaConnection> server = CompletableFuture.supplyAsync(() -> {
                ConnectionRequest r = l.accept(WAIT);
                assertTrue(r.isDatagram());
                CmTestSupport.assertPrivateData(toServer, r.privateData());
                return r.accept(
                        new ConnectionSetup().beforeConnect(c -> {
                            MemoryRegion mr = c.protectionDomain().allocateMemoryRegion(4096, Access.LOCAL_WRITE);
                            smr.set(mr);
                            c.queuePair().postRecv(recvs.clear().add(11).sge(mr, 0, 2048));
                        }),
                        toClient,
                        WAIT);
            });
            RdmaConnection client = RdmaConnection.connectUd(
                    cch,
                    address(port),
                    new ConnectionSetup().beforeConnect(c -> {
                        MemoryRegion mr = c.protectionDomain().allocateMemoryRegion(4096, Access.LOCAL_WRITE);
                        cmr.set(mr);
                        c.queuePair().postRecv(recvc.clear().add(21).sge(mr, 0, 2048));
                    }),
                    toServer,
                    WAIT);
            RdmaConnection srv = server.get(30, TimeUnit.SECONDS);
            try {
                assertTrue(client.isDatagram() && srv.isDatagram());
                assertEquals(ConnectionState.CONNECTED, client.state());
                assertEquals(ConnectionState.CONNECTED, srv.state());
                assertEquals(QueuePairType.UD, client.queuePair().type());
                assertEquals(QueuePairState.RTS, client.queuePair().query().state());
                assertEquals(QueuePairState.RTS, srv.queuePair().query().state());
                // what the SIDR reply told the active side
                assertEquals(srv.queuePair().qpNumber(), client.remoteQpn(), "the peer's QPN");
                assertEquals(srv.qkey(), client.remoteQkey(), "the peer's Q_Key");
                assertEquals(srv.queuePair().query().qkey(), srv.qkey(), "the Q_Key the QP really has");
                assertTrue(srv.qkey() != 0);
                AddressHandle ah = client.addressHandle();
                assertNotNull(ah);
                assertNull(srv.addressHandle(), "the accepting side learns its peers from what they send");
                assertEquals(-1, srv.remoteQpn());
                CmTestSupport.assertPrivateData(toClient, client.peerPrivateData());
                System.out.printf(
                        "UdGuestTest: client QPN %d -> server QPN %d, Q_Key 0x%x, %s%n",
                        client.queuePair().qpNumber(), client.remoteQpn(), client.remoteQkey(), ah.vector());

                // client -> server
                MemoryRegion c = cmr.get(), s = smr.get();
                String hello = "hello over UD from the client";
                c.segment().setString(2048, hello);
                int n = hello.length() + 1;
                client.queuePair()
                        .postSend(wrs.clear()
                                .send(1)
                                .sge(c, 2048, n)
                                .destination(ah, client.remoteQpn(), client.remoteQkey())
                                .signaled());
                CmTestSupport.poll(client.sendCompletionQueue(), wcs, 1);
                assertTrue(wcs.isSuccess(0), "send status " + wcs.status(0));
                CmTestSupport.poll(srv.receiveCompletionQueue(), wcs, 1);
                assertTrue(wcs.isSuccess(0), "receive status " + wcs.status(0));
                assertEquals(11, wcs.wrId(0));
                assertEquals(GRH + n, wcs.byteLength(0), "40-byte GRH + the message");
                assertEquals(client.queuePair().qpNumber(), wcs.sourceQp(0), "the sender's QPN");
                assertEquals(hello, s.segment().getString(GRH));
                Gid sender = sourceGid(s.segment());
                int clientQpn = wcs.sourceQp(0);

                // server -> client, through an address handle built from the GRH
                AddressVector back = AddressVector.global(
                        ah.vector().port(), sender, ah.vector().sgidIndex());
                try (AddressHandle reply = srv.protectionDomain().createAddressHandle(back)) {
                    String answer = "and back from the server";
                    s.segment().setString(3072, answer);
                    int m = answer.length() + 1;
                    srv.queuePair()
                            .postSend(wrs.clear()
                                    .send(2)
                                    .sge(s, 3072, m)
                                    .destination(reply, clientQpn, client.qkey())
                                    .signaled());
                    CmTestSupport.poll(srv.sendCompletionQueue(), wcs, 1);
                    assertTrue(wcs.isSuccess(0), "send status " + wcs.status(0));
                    CmTestSupport.poll(client.receiveCompletionQueue(), wcs, 1);
                    assertTrue(wcs.isSuccess(0), "receive status " + wcs.status(0));
                    assertEquals(21, wcs.wrId(0));
                    assertEquals(GRH + m, wcs.byteLength(0));
                    assertEquals(srv.queuePair().qpNumber(), wcs.sourceQp(0));
                    assertEquals(answer, c.segment().getString(GRH));
                    // the reply came from the GID the CM resolved for the server, and the server saw ours
                    assertEquals(ah.vector().dgid(), sourceGid(c.segment()), "the reply's source GID");
                    assertEquals(
                            client.context()
                                    .queryGid(ah.vector().port(), ah.vector().sgidIndex()),
                            sender,
                            "the source GID of the client's SEND");
                }
            } finally {
                client.close();
                srv.close();
                client.close();
                if (cmr.get() != null) {
                    cmr.get().close();
                }
                if (smr.get() != null) {
                    smr.get().close();
                }
            }
            assertNull(
                    client.addressHandle() != null && client.addressHandle().isOpen() ? "open" : null,
                    "the address handle is closed with the connection");
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm ids, QPs, CQs, MRs back");
    }
}
