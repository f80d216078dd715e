package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.verbs4j.cm.CmMisuseGuestTest.assertClear;
import static org.verbs4j.cm.CmTestSupport.WAIT;

import java.net.InetAddress;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Gid;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.testing.RdmaTest;

/**
 * Misuse of multicast on rxe0 through the public API: joins the library refuses (an RC queue
 * pair, a closed one, one with another Q_Key, a unicast address, a closed channel), posts to a
 * group that was left or closed, the queue pair closed before its group, and {@code
 * ibv_attach_mcast} of an RC queue pair on the real device. Each refusal names the verb, what was
 * wrong and a fix; no cm id, QP, CQ or MR stays behind.
 */
@RdmaTest
class MulticastMisuseGuestTest {
    private Map<String, Integer> before;
    private CmEventChannel ch;
    private ProtectionDomain pd;
    private InetAddress ip, group;

    @BeforeEach
    void open() throws Exception {
        before = CmTestSupport.leakCounts();
        ch = CmEventChannel.open();
        ip = CmTestSupport.ip();
        group = InetAddress.getByName("239.7.7.3");
        pd = ch.deviceContext(ip).allocateProtectionDomain();
    }

    @AfterEach
    void close() {
        pd.close();
        if (ch.isOpen()) {
            ch.close();
        }
        assertEquals(before, CmTestSupport.leakCounts(), "cm_id/qp/cq/mr counts after the case");
    }

    private QueuePair rc(CompletionQueue cq) {
        return pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq));
    }

    @Test
    void aJoinWithAnRcQueuePairIsRefused() {
        try (CompletionQueue cq = pd.context().createCompletionQueue(4);
                QueuePair qp = rc(cq)) {
            assertClear(
                    assertThrows(InvalidRequestException.class, () -> MulticastGroup.join(ch, ip, group, qp, WAIT)),
                    "rdma_join_multicast",
                    "RC queue pair",
                    "only UD");
            assertClear(
                    assertThrows(InvalidRequestException.class, () -> qp.attachMulticast(Gid.ofAddress(group), 0)),
                    "ibv_attach_mcast",
                    "RC queue pair");
        }
    }

    @Test
    void aJoinWithAClosedQueuePairOrOfAUnicastAddressIsRefused() {
        MulticastMember m = new MulticastMember(pd, 1, false);
        try {
            assertClear(
                    assertThrows(InvalidRequestException.class, () -> MulticastGroup.join(ch, ip, ip, m.qp, WAIT)),
                    "rdma_join_multicast",
                    "is not a multicast address");
        } finally {
            m.close();
        }
        assertClear(
                assertThrows(ResourceClosedException.class, () -> MulticastGroup.join(ch, ip, group, m.qp, WAIT)),
                "rdma_join_multicast",
                "queue pair is closed");
    }

    @Test
    void aJoinWithAnotherQkeyIsRefusedAndLeavesNothingJoined() {
        try (CompletionQueue cq = pd.context().createCompletionQueue(4);
                QueuePair qp = pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cq))) {
            qp.activateUd(1, 0x1111, 0);
            assertClear(
                    assertThrows(InvalidRequestException.class, () -> MulticastGroup.join(ch, ip, group, qp, WAIT)),
                    "rdma_join_multicast",
                    "Q_Key 0x1111",
                    "MulticastGroup.QKEY");
        }
    }

    @Test
    void aJoinOnAClosedChannelIsRefused() {
        try (MulticastMember m = new MulticastMember(pd, 1, false)) {
            ch.close();
            assertClear(
                    assertThrows(ResourceClosedException.class, () -> MulticastGroup.join(ch, ip, group, m.qp, WAIT)),
                    "rdma_create_id");
        }
    }

    @Test
    void aPostToAGroupThatWasLeftOrClosedIsRefused() {
        try (MulticastMember m = new MulticastMember(pd, 2, false);
                SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
            MulticastGroup g = MulticastGroup.join(ch, ip, group, m.qp, WAIT);
            wrs.send(1)
                    .sge(m.mr, 0, MulticastMember.LENGTH)
                    .destination(g.addressHandle(), g.remoteQpn(), g.remoteQkey());
            g.leave();
            assertClear(
                    assertThrows(InvalidRequestException.class, () -> m.qp.postSend(wrs)),
                    "ibv_post_send",
                    "address handle that was closed");
            wrs.clear().send(2).sge(m.mr, 0, MulticastMember.LENGTH);
            assertClear(
                    assertThrows(
                            ResourceClosedException.class,
                            () -> wrs.destination(g.addressHandle(), g.remoteQpn(), g.remoteQkey())),
                    "ibv_post_send",
                    "address handle is closed");
            g.close();
            g.close();
            g.leave(); // after close: nothing to do
            assertFalse(g.isJoined());
        }
    }

    @Test
    void aQueuePairClosedBeforeItsGroupIsLeftCleanly() {
        MulticastMember m = new MulticastMember(pd, 1, false);
        MulticastGroup g = MulticastGroup.join(ch, ip, group, m.qp, WAIT);
        m.close(); // the kernel detaches a queue pair it destroys
        g.close(); // leaves without a detach, destroys the id
        assertFalse(g.isJoined());
        assertFalse(g.addressHandle().isOpen());
    }
}
