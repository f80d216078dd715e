package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.StandardProtocolFamily;
import java.nio.channels.DatagramChannel;
import java.nio.channels.MembershipKey;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.verbs4j.AddressHandle;
import org.verbs4j.AddressVector;
import org.verbs4j.Context;
import org.verbs4j.Gid;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.Verbs;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.PeerJvm;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * UD multicast on rxe0. Through rdma_cm: one sender reaching two receivers, one in this JVM and
 * one in a second JVM ({@link MulticastPeer}), each joined with its own cm id
 * ({@code rdma_join_multicast}); {@value #COUNT} datagrams of distinct content, every one checked
 * byte for byte and in order by both receivers (rxe loops multicast back through the IP stack:
 * with the receives posted before the sends, none is lost). Without rdma_cm: two queue pairs
 * attached with {@code ibv_attach_mcast}, one sender. The kernel's counts of cm ids, QPs, CQs and
 * MRs return to where they were.
 */
@RdmaTest
class MulticastGuestTest {
    private static final int COUNT = 32;

    /** Sends datagrams 0..COUNT-1 from {@code sender} to {@code ah}, QPN and Q_Key; all complete successfully. */
    private static void sendAll(MulticastMember sender, AddressHandle ah, int qpn, int qkey) {
        try (SendWorkRequests wrs = new SendWorkRequests(COUNT, 1);
                WorkCompletions wcs = new WorkCompletions(COUNT)) {
            for (int i = 0; i < COUNT; i++) {
                wrs.send(i)
                        .sge(sender.mr, MulticastMember.offset(i), MulticastMember.LENGTH)
                        .destination(ah, qpn, qkey)
                        .signaled();
            }
            sender.qp.postSend(wrs);
            assertEquals(COUNT, sender.cq.poll(wcs, COUNT, WAIT), "send completions");
            for (int k = 0; k < COUNT; k++) {
                assertTrue(wcs.isSuccess(k), "send " + k + ": status " + wcs.status(k));
            }
        }
    }

    /** {@link MulticastMember#expectAll}; on a failure, prints the kernel's multicast state first. */
    private static void expectAll(MulticastMember receiver, int senderQpn, String group) {
        try {
            receiver.expectAll(senderQpn, WAIT);
        } catch (AssertionError e) {
            System.out.println(CmTestSupport.run(
                    List.of(
                            "sh",
                            "-c",
                            "ip maddr show; cat /proc/net/igmp; ip route get " + group + "; rdma res show qp"),
                    20));
            throw e;
        }
    }

    @Test
    void oneSenderReachesTwoReceiversInTwoJvms() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        InetAddress ip = CmTestSupport.ip();
        InetAddress group = InetAddress.getByName("239.7.7.1");
        try (CmEventChannel ch = CmEventChannel.open()) {
            Context ctx = ch.deviceContext(ip);
            try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                    MulticastMember receiver = new MulticastMember(pd, COUNT, true);
                    MulticastMember sender = new MulticastMember(pd, COUNT, false);
                    PeerJvm peer = new PeerJvm(
                            MulticastPeer.class,
                            List.of("-XX:TieredStopAtLevel=1", "-Xshare:auto"),
                            ip.getHostAddress(),
                            group.getHostAddress(),
                            Integer.toString(COUNT),
                            Integer.toString(sender.qp.qpNumber()))) {
                MulticastGroup mine = MulticastGroup.join(ch, ip, group, receiver.qp, WAIT);
                MulticastGroup out = MulticastGroup.join(ch, ip, group, sender.qp, WAIT);
                try {
                    assertTrue(mine.isJoined() && out.isJoined());
                    assertEquals(MulticastGroup.MULTICAST_QPN, out.remoteQpn(), "the join event's QPN");
                    assertEquals(MulticastGroup.QKEY, out.remoteQkey(), "the join event's Q_Key");
                    assertEquals(Gid.ofAddress(group), out.mgid(), "RoCE v2: the IPv4-mapped group address");
                    assertEquals(out.mgid(), out.addressHandle().vector().dgid());
                    System.out.printf(
                            "MulticastGuestTest: group %s, MGID %s, MLID %d, AH %s%n",
                            group.getHostAddress(),
                            out.mgid(),
                            out.mlid(),
                            out.addressHandle().vector());
                    String joined = peer.awaitLine("JOINED", 120);
                    assertTrue(joined.contains(out.mgid().toString()), joined);

                    sendAll(sender, out.addressHandle(), out.remoteQpn(), out.remoteQkey());
                    expectAll(receiver, sender.qp.qpNumber(), group.getHostAddress());
                    peer.awaitLine("RECEIVED " + COUNT, 120);
                    peer.awaitSuccess(60);

                    mine.leave();
                    assertFalse(mine.isJoined());
                    assertFalse(mine.addressHandle().isOpen(), "the address handle is closed on leave");
                    mine.leave(); // idempotent
                } finally {
                    mine.close();
                    out.close();
                }
                assertFalse(out.addressHandle().isOpen());
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm ids, QPs, CQs, MRs back");
    }

    /**
     * Without rdma_cm: two UD queue pairs attached to a group's GID with {@code ibv_attach_mcast},
     * a third sends to it through an address handle of its own. On RoCE the device's netdev must be
     * in the IP group (rdma_cm's join does it; here a {@link DatagramChannel} joins it), or the
     * kernel does not loop the datagrams back; after {@code ibv_detach_mcast} the queue pairs close.
     */
    @Test
    void twoAttachedQueuePairsReceiveWithoutRdmaCm() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        InetAddress ip = CmTestSupport.ip();
        InetAddress group = InetAddress.getByName("239.7.7.2");
        Gid mgid = Gid.ofAddress(group);
        NetworkInterface netdev = NetworkInterface.getByInetAddress(ip);
        try (Context ctx = Verbs.open(RdmaTestSupport.deviceName());
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                MulticastMember a = new MulticastMember(pd, COUNT, true);
                MulticastMember b = new MulticastMember(pd, COUNT, true);
                MulticastMember sender = new MulticastMember(pd, COUNT, false);
                DatagramChannel ipSocket = DatagramChannel.open(StandardProtocolFamily.INET)) {
            MembershipKey ipMembership = ipSocket.join(group, netdev); // IP_ADD_MEMBERSHIP on the netdev
            a.qp.attachMulticast(mgid, 0);
            b.qp.attachMulticast(mgid, 0);
            int sgid = ctx.roceV2Gid(1, ip).index();
            try (AddressHandle ah = pd.createAddressHandle(AddressVector.global(1, mgid, sgid))) {
                sendAll(sender, ah, MulticastGroup.MULTICAST_QPN, MulticastGroup.QKEY);
                expectAll(a, sender.qp.qpNumber(), group.getHostAddress());
                expectAll(b, sender.qp.qpNumber(), group.getHostAddress());
            } finally {
                a.qp.detachMulticast(mgid, 0);
                b.qp.detachMulticast(mgid, 0);
                ipMembership.drop();
            }
        }
        assertEquals(before, CmTestSupport.leakCounts(), "QPs, CQs, MRs back");
    }
}
