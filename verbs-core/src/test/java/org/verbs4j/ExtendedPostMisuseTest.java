package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;

/**
 * Misuse of the extended posting API and of memory windows on the stand-in provider, in checked
 * and unchecked mode: what keeps the JVM safe (a NULL builder, a closed region, window or chain,
 * a second posting thread, a window whose region would be freed under it) is refused in both;
 * the semantic checks (overruns, ranges, rights) in checked mode. Nothing refused reaches the
 * provider ({@code wr_start} included).
 */
class ExtendedPostMisuseTest extends ExtendedStandInTest {
    private QueuePair qp(EnumSet<SendOperation> ops) {
        return extended(o, ops, 4, 1);
    }

    private void nothingReachedTheProvider() {
        assertEquals(0, p.wqeCount());
        assertEquals(0, p.wrCompletes());
        assertEquals(0, p.wrAborts());
    }

    @Test
    void anOperationTheQueuePairWasNotCreatedForIsRefused() {
        try (QueuePair qp = qp(EnumSet.of(SendOperation.SEND));
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.send(1).sge(o.mr, 0, 8);
            wrs.write(2, 0x1000, 5).sge(o.mr, 0, 8);
            refused(
                    "ibv_wr_start",
                    Errno.EINVAL,
                    () -> qp.postSendExtended(wrs),
                    "request #1 is a RDMA_WRITE",
                    "SendOperation.RDMA_WRITE");
            nothingReachedTheProvider();
        }
    }

    @Test
    void aRawOpcodeWithoutABuilderAbortsThePost() {
        try (QueuePair qp = qp(EnumSet.of(SendOperation.SEND));
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.send(1).sge(o.mr, 0, 8).signaled();
            wrs.segment().set(java.lang.foreign.ValueLayout.JAVA_INT, 28, SendWorkRequests.OP_RDMA_READ);
            refused("ibv_wr_complete", Errno.EINVAL, () -> qp.postSendExtended(wrs), "none of them was posted");
            assertEquals(1, p.wrAborts(), "started, then aborted: the provider's lock is released");
            assertEquals(0, p.wqeCount());
            assertEquals(0, qp.sendOutstanding());
        }
    }

    @Test
    void aClassicQueuePairRefusesTheExtendedPost() {
        try (QueuePair qp = o.rcQueuePair(4, 4);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.send(1).sge(o.mr, 0, 8);
            refused("ibv_wr_start", Errno.EINVAL, () -> qp.postSendExtended(wrs), "createExtendedQueuePair");
            nothingReachedTheProvider();
        }
    }

    @Test
    void noOperationsIsRefusedAtCreation() {
        refused(
                "ibv_create_qp_ex",
                Errno.EINVAL,
                () -> qp(EnumSet.noneOf(SendOperation.class)),
                "no send operation asked for");
    }

    @Test
    void closedObjectsAreRefusedByTheExtendedPost() {
        QueuePair qp = qp(EnumSet.of(SendOperation.SEND, SendOperation.RDMA_WRITE));
        SendWorkRequests wrs = new SendWorkRequests(4, 1);
        try (Arena a = Arena.ofConfined()) {
            MemoryRegion mr = ForeignHandles.memoryRegion(o.pd, a.allocate(256), 9, 9, EnumSet.of(Access.LOCAL_WRITE));
            wrs.send(1).sge(mr, 0, 64);
            mr.close();
            refused("ibv_post_send", Errno.EINVAL, () -> qp.postSendExtended(wrs), "closed (deregistered)");
            wrs.close();
            assertThrows(VerbsException.class, () -> qp.postSendExtended(wrs));
            qp.close();
            SendWorkRequests fresh = new SendWorkRequests(1, 1);
            fresh.send(2).sge(o.mr, 0, 8);
            assertThrows(VerbsException.class, () -> qp.postSendExtended(fresh));
            fresh.close();
        }
        nothingReachedTheProvider();
    }

    @Test
    void aSecondThreadPostingMeetsTheGate() throws Exception {
        try (QueuePair qp = qp(EnumSet.of(SendOperation.SEND));
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.send(1).sge(o.mr, 0, 8);
            CountDownLatch inside = new CountDownLatch(1), leave = new CountDownLatch(1);
            CompletableFuture<Void> holder = CompletableFuture.runAsync(() -> {
                assertTrue(qp.sendGate.tryEnter()); // stands for a post in progress on this thread
                inside.countDown();
                try {
                    leave.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    qp.sendGate.exit();
                }
            });
            assertTrue(inside.await(10, TimeUnit.SECONDS));
            assertThrows(ResourceBusyException.class, () -> qp.postSendExtended(wrs));
            leave.countDown();
            holder.get(10, TimeUnit.SECONDS);
            nothingReachedTheProvider();
        }
    }

    @Test
    void overrunsAreRefusedInCheckedMode() {
        try (QueuePair qp = qp(EnumSet.of(SendOperation.SEND));
                SendWorkRequests wrs = new SendWorkRequests(8, 2)) {
            for (int i = 0; i < 5; i++) {
                wrs.send(i).sge(o.mr, 0, 8);
            }
            if (Verbs.CHECKED) {
                assertThrows(QueueFullException.class, () -> qp.postSendExtended(wrs));
                wrs.clear().send(1).sge(o.mr, 0, 8).sge(o.mr, 8, 8);
                refused("ibv_post_send", Errno.EINVAL, () -> qp.postSendExtended(wrs), "SGE");
                nothingReachedTheProvider();
            }
        }
    }

    @Test
    void aWindowRefusesMisuseAndKeepsItsRegionAndDomainOpen() {
        MemoryRegion mwr = bindable(o);
        MemoryRegion plain = o.mr; // no MW_BIND
        MemoryWindow mw = o.pd.allocateWindow(MemoryWindow.Type.TYPE_2);
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1);
                QueuePair qp = qp(EnumSet.of(SendOperation.BIND_MW))) {
            if (Verbs.CHECKED) {
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.bindWindow(1, mw, mwr, 4000, 200, EnumSet.of(Access.REMOTE_WRITE)),
                        "outside the region");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.bindWindow(1, mw, plain, 0, 64, EnumSet.of(Access.REMOTE_WRITE)),
                        "MW_BIND");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.bindWindow(1, mw, mwr, 0, 64, EnumSet.of(Access.REMOTE_ATOMIC)),
                        "REMOTE_ATOMIC");
            }
            wrs.bindWindow(1, mw, mwr, 0, 64, EnumSet.of(Access.REMOTE_WRITE)).signaled();
            // the window may not outlive its region nor its protection domain
            refused("ibv_dereg_mr", Errno.EBUSY, mwr::close, "open object");
            refused("ibv_dealloc_pd", Errno.EBUSY, o.pd::close, "open object");
            mw.close();
            refused("ibv_post_send", Errno.EINVAL, () -> qp.postSendExtended(wrs), "memory window that was closed");
            refused("ibv_post_send", Errno.EINVAL, () -> qp.postSend(wrs), "memory window that was closed");
            refused(
                    "ibv_post_send",
                    Errno.EBADF,
                    () -> wrs.clear().bindWindow(1, mw, mwr, 0, 64, EnumSet.of(Access.REMOTE_WRITE)),
                    "closed");
            refused("ibv_dealloc_mw", Errno.EBADF, mw::close, "already closed");
            mwr.close(); // the window no longer holds it
            nothingReachedTheProvider();
        } finally {
            if (mw.isOpen()) {
                mw.close();
            }
            if (mwr.isOpen()) {
                mwr.close();
            }
        }
    }

    @Test
    void aType1WindowIsNotBoundByAWorkRequest() {
        MemoryRegion mwr = bindable(o);
        try (MemoryWindow mw = o.pd.allocateWindow(MemoryWindow.Type.TYPE_1);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            refused(
                    "ibv_post_send",
                    Errno.EINVAL,
                    () -> wrs.bindWindow(1, mw, mwr, 0, 64, EnumSet.of(Access.REMOTE_WRITE)),
                    "type 1");
            assertEquals(MemoryWindow.Type.TYPE_1, mw.type());
        } finally {
            mwr.close();
        }
    }

    @Test
    void windowOperationsCarryNoPayload() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            if (Verbs.CHECKED) {
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.localInvalidate(1, 5).sge(o.mr, 0, 8),
                        "carries no SGEs");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.clear().localInvalidate(1, 5).inline(MemorySegment.ofArray(new byte[4])),
                        "inline");
            }
        }
    }

    @Test
    void aType1BindRefusesMisuseBeforeTheProvider() {
        MemoryRegion mwr = registeredBindable(o);
        MemoryWindow one = o.pd.allocateWindow(MemoryWindow.Type.TYPE_1);
        MemoryWindow two = o.pd.allocateWindow(MemoryWindow.Type.TYPE_2);
        EnumSet<Access> write = EnumSet.of(Access.REMOTE_WRITE);
        try (QueuePair qp = o.rcQueuePair(1, 1);
                ProtectionDomain other = ForeignHandles.protectionDomain(o.ctx, p.makePd(p.context()))) {
            refused("ibv_bind_mw", Errno.EINVAL, () -> two.bind(qp, 1, mwr, 0, 64, write, true), "type 2");
            refused("ibv_bind_mw", Errno.EINVAL, () -> one.unbind(qp, 1, true), "not bound");
            MemoryRegion wrapped = bindable(o); // no struct ibv_mr: the provider would read through NULL
            refused(
                    "ibv_bind_mw",
                    Errno.EINVAL,
                    () -> one.bind(qp, 1, wrapped, 0, 64, write, true),
                    "no struct ibv_mr");
            wrapped.close();
            QueuePair elsewhere = ForeignHandles.queuePair(
                    other, p.qp(), QueuePairInit.of(QueuePairType.RC, o.cq), QueuePairState.RTS);
            refused("ibv_bind_mw", Errno.EPERM, () -> one.bind(elsewhere, 1, mwr, 0, 64, write, true), "different");
            elsewhere.close();
            if (Verbs.CHECKED) {
                refused("ibv_bind_mw", Errno.EINVAL, () -> one.bind(qp, 1, mwr, 4000, 200, write, true), "outside");
                MemoryRegion plain = o.pd.register(
                        Arena.ofAuto().allocate(256),
                        EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE),
                        (pd, a, l, acc) -> MemorySegment.ofAddress(p.regDeviceMr(pd.address(), a, l, acc)),
                        h -> p.deregDeviceMr(h.address()));
                refused("ibv_bind_mw", Errno.EINVAL, () -> one.bind(qp, 1, plain, 0, 64, write, true), "MW_BIND");
                plain.close();
                refused(
                        "ibv_bind_mw",
                        Errno.EINVAL,
                        () -> one.bind(qp, 1, mwr, 0, 64, EnumSet.of(Access.REMOTE_ATOMIC), true),
                        "REMOTE_ATOMIC");
                // the bind takes a send-queue slot: a full queue refuses it as it refuses a post
                one.bind(qp, 1, mwr, 0, 64, write, false);
                assertThrows(QueueFullException.class, () -> one.bind(qp, 2, mwr, 0, 64, write, true));
                assertEquals(1, p.wqeCount());
            }
            assertEquals(Verbs.CHECKED ? 1 : 0, p.wqeCount());
        } finally {
            two.close();
        }
        // closed window, closed region, closed queue pair: refused, nothing reaches the provider
        long before = p.wqeCount();
        QueuePair qp = o.rcQueuePair(4, 4);
        MemoryRegion gone = registeredBindable(o);
        gone.close();
        refused(
                "ibv_bind_mw",
                Errno.EBADF,
                () -> one.bind(qp, 3, gone, 0, 64, EnumSet.of(Access.REMOTE_WRITE), true),
                "closed");
        one.close();
        refused(
                "ibv_bind_mw",
                Errno.EBADF,
                () -> one.bind(qp, 3, mwr, 0, 64, EnumSet.of(Access.REMOTE_WRITE), true),
                "closed");
        MemoryWindow three = o.pd.allocateWindow(MemoryWindow.Type.TYPE_1);
        qp.close();
        assertThrows(VerbsException.class, () -> three.bind(qp, 4, mwr, 0, 64, EnumSet.of(Access.REMOTE_WRITE), true));
        three.close();
        assertEquals(before, p.wqeCount());
        mwr.close(); // the closed window holds it no longer
    }

    @Test
    void atomicWriteIsRefusedAtCreationWhereTheDeviceLacksIt() {
        assertEquals(0, p.lastCreateQpExOps(), "a fresh stand-in: no create_qp_ex yet");
        refused(
                "ibv_create_qp_ex",
                Errno.EOPNOTSUPP,
                () -> qp(EnumSet.of(SendOperation.SEND, SendOperation.ATOMIC_WRITE)),
                "has no RDMA ATOMIC WRITE",
                "device_cap_flags_ex lacks IB_UVERBS_DEVICE_ATOMIC_WRITE",
                "leave SendOperation.ATOMIC_WRITE out");
        assertEquals(0, p.lastCreateQpExOps(), "refused before the provider's create_qp_ex");
    }

    @Test
    void atomicWriteThroughTheClassicPostIsRefusedInEveryMode() {
        try (QueuePair qp = o.rcQueuePair(4, 4);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.send(1).sge(o.mr, 0, 8);
            wrs.atomicWrite(2, 0x1000, 5, 0x1122334455667788L).signaled();
            refused(
                    "ibv_post_send",
                    Errno.EINVAL,
                    () -> qp.postSend(wrs),
                    "request #1 is an ATOMIC_WRITE, which only the extended API posts",
                    "postSendExtended");
            nothingReachedTheProvider();
            assertEquals(0, qp.sendOutstanding());
        }
    }

    @Test
    void aMisalignedAtomicWriteTargetOrAnSgeOnItIsRefusedInCheckedMode() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            if (Verbs.CHECKED) {
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.atomicWrite(1, 0x1004, 5, 1),
                        "atomic remote address 0x1004 is not 8-byte aligned");
                assertEquals(0, wrs.size(), "the refused request left the chain as it was");
                wrs.atomicWrite(2, 0x1008, 5, 1);
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.sge(o.mr, 0, 8),
                        "a LOCAL_INV, BIND_MW or ATOMIC_WRITE request carries no SGEs");
                refused(
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.inline(MemorySegment.ofArray(new byte[8])),
                        "only SEND and RDMA WRITE can be inline");
                assertEquals(1, wrs.size());
            }
        }
    }

    @Test
    void flushAccessIsRefusedAtRegistrationWhereTheDeviceLacksIt() {
        MemorySegment m = o.arena.allocate(4096, 64);
        for (Access a : EnumSet.of(Access.FLUSH_GLOBAL, Access.FLUSH_PERSISTENT)) {
            refused(
                    "ibv_reg_mr",
                    Errno.EOPNOTSUPP,
                    () -> o.pd.register(o.arena, m, EnumSet.of(Access.LOCAL_WRITE, a)),
                    "has no RDMA FLUSH for Access." + a.name(),
                    "device_cap_flags_ex lacks IB_UVERBS_DEVICE_" + a.name(),
                    "register the region without Access." + a.name());
            refused("ibv_reg_mr", Errno.EOPNOTSUPP, () -> o.pd.allocateMemoryRegion(64, a), "Access." + a.name());
        }
    }
}
