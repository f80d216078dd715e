package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * The misuse catalogue, host tier: each test is one misuse of the public API, driven through the
 * real dispatch into a C stand-in provider, and asserts its documented outcome (listed in
 * docs/misuse-catalogue.md). Surefire runs this class twice: in checked mode and with
 * {@code -Dverbs4j.unchecked=true}; every outcome that keeps the JVM safe must hold in both, the
 * accounting cases only in checked mode.
 */
@NeedsNativeToolchain
class MisuseCatalogueTest {

    static <T extends VerbsException> T refused(
            Class<T> type, String verb, int errno, Executable call, String... says) {
        T e = assertThrows(type, call);
        assertEquals(verb, e.verb(), e.getMessage());
        UserMessages.check(e);
        assertEquals(errno, e.errno(), e.getMessage());
        assertTrue(e.getMessage().startsWith(verb + " failed: " + Errno.name(errno)), e.getMessage());
        for (String s : says) {
            assertTrue(e.getMessage().contains(s), "'" + s + "' not in: " + e.getMessage());
        }
        return e;
    }

    /** The stand-in bed: a context, PD, CQ, a registered region and an RC queue pair in RTS. */
    @NeedsNativeToolchain
    abstract static class Bed {
        StandInProvider p;
        Arena arena;
        Context ctx;
        ProtectionDomain pd;
        CompletionQueue cq;
        MemoryRegion mr;
        QueuePair qp;

        @BeforeEach
        void open() {
            StandInObjects o = StandInObjects.open();
            p = o.p;
            arena = o.arena;
            ctx = o.ctx;
            pd = o.pd;
            cq = o.cq;
            mr = o.mr;
            qp = o.rcQueuePair(16, 2, 64);
        }

        final List<NativeResource> extra = new java.util.ArrayList<>();

        MemoryRegion region(int size, Access... access) {
            MemoryRegion r = ForeignHandles.memoryRegion(
                    pd,
                    arena.allocate(size, 64),
                    0x1111,
                    0x2222,
                    access.length == 0 ? EnumSet.noneOf(Access.class) : EnumSet.of(access[0], access));
            extra.add(r);
            return r;
        }

        @AfterEach
        void close() {
            for (NativeResource r : extra.reversed()) {
                if (r.isOpen()) {
                    r.close();
                }
            }
            for (NativeResource r : new NativeResource[] {qp, mr, cq, pd, ctx}) {
                if (r != null && r.isOpen()) {
                    try {
                        r.close();
                    } catch (ResourceBusyException e) {
                        // a case left a dependent open on purpose: the leak check of the cleaner handles it
                    }
                }
            }
            p.close(); // its arena too
        }

        int drain(WorkCompletions wcs) {
            int total = 0;
            for (int n; (n = cq.poll(wcs)) > 0; ) {
                total += n;
            }
            return total;
        }
    }

    // ---- lifetimes ----------------------------------------------------------------------------

    @Nested
    class Lifetimes extends Bed {

        @Test
        void inlineFromAClosedArenaIsRefusedWhenAdded() {
            MemorySegment data;
            try (Arena a = Arena.ofConfined()) {
                data = a.allocate(16);
            }
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                MemorySegment d = data;
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EFAULT,
                        () -> wrs.send(1).inline(d),
                        "freed");
            }
        }

        @Test
        void inlineWhoseArenaClosesBeforeThePostSendsTheCopy() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment data = a.allocate(16);
                    data.fill((byte) 7);
                    wrs.send(1).inline(data).signaled();
                } // the source is freed here; the post must not read it (it crashed the JVM before)
                qp.postSend(wrs);
                StandInProvider.Wqe w = p.wqe(0);
                assertEquals(16, w.totalLength());
                assertEquals(
                        7, MemorySegment.ofAddress(w.addr()).reinterpret(16).get(JAVA_BYTE, 15));
            }
        }

        @Test
        void inlineFromAHeapSegmentIsCopiedInEveryMode() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                byte[] bytes = new byte[24];
                java.util.Arrays.fill(bytes, (byte) 3);
                wrs.send(1).inline(MemorySegment.ofArray(bytes)).signaled();
                java.util.Arrays.fill(bytes, (byte) 0);
                qp.postSend(wrs);
                StandInProvider.Wqe w = p.wqe(0);
                assertEquals(24, w.totalLength());
                assertEquals(
                        3, MemorySegment.ofAddress(w.addr()).reinterpret(24).get(JAVA_BYTE, 0));
            }
        }

        @Test
        void inlineBeyondTheChainsInlineCapacityIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 2, 32)) {
                wrs.send(1).inline(MemorySegment.ofArray(new byte[24]));
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.inline(MemorySegment.ofArray(new byte[16])),
                        "inline capacity");
                assertEquals(1, wrs.size());
            }
        }

        @Test
        void inlineOnAChainWithoutInlineCapacityIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1, 0)) {
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.send(1).inline(MemorySegment.ofArray(new byte[1])),
                        "inline capacity");
            }
        }

        @Test
        void inlineDataOfARequestWithoutInlineBytesIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                wrs.write(1, 0x1000, 5).sge(mr, 0, 8);
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.inlineData(0),
                        "no inline data");
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.inlineData(1),
                        "not in this chain");
            }
        }

        @Test
        void inlineDataRewrittenAfterTheChainClosesReachesNoAdapter() {
            SendWorkRequests wrs = new SendWorkRequests(2, 1);
            wrs.send(1).inline(MemorySegment.ofArray(new byte[] {1, 2})).signaled();
            MemorySegment payload = wrs.inlineData(0);
            payload.set(JAVA_BYTE, 1, (byte) 9); // the re-post sends the rewritten byte
            qp.postSend(wrs);
            StandInProvider.Wqe w = p.wqe(0);
            assertEquals(9, MemorySegment.ofAddress(w.addr()).reinterpret(2).get(JAVA_BYTE, 1));
            wrs.close();
            wrs = null;
            System.gc(); // the view alone keeps the staging memory: writing it cannot touch freed memory
            payload.set(JAVA_BYTE, 0, (byte) 5);
            assertEquals(5, payload.get(JAVA_BYTE, 0));
            SendWorkRequests closed = new SendWorkRequests(1, 1);
            closed.send(2).inline(MemorySegment.ofArray(new byte[1]));
            closed.close();
            refused(ResourceClosedException.class, "ibv_post_send", Errno.EBADF, () -> closed.inlineData(0), "closed");
        }

        @Test
        void anSgeOfAClosedRegionIsRefusedWhenAdded() {
            MemoryRegion r = region(256, Access.LOCAL_WRITE);
            r.close();
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                refused(
                        ResourceClosedException.class,
                        "ibv_post_send",
                        Errno.EBADF,
                        () -> wrs.send(1).sge(r, 0, 8),
                        "closed");
            }
        }

        @Test
        void aSendChainNamingARegionClosedAfterwardsIsRefusedAtPost() {
            MemoryRegion r = region(256, Access.LOCAL_WRITE);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                wrs.send(1).sge(r, 0, 8).signaled();
                r.close();
                long before = p.calls(StandInProvider.Op.POST_SEND);
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> qp.postSend(wrs),
                        "closed (deregistered) after the SGE was added",
                        "nothing was posted");
                assertEquals(before, p.calls(StandInProvider.Op.POST_SEND), "the provider never saw it");
            }
        }

        @Test
        void aReceiveChainNamingARegionClosedAfterwardsIsRefusedAtPost() {
            MemoryRegion r = region(256, Access.LOCAL_WRITE);
            try (ReceiveWorkRequests wrs = new ReceiveWorkRequests(2, 1)) {
                wrs.add(1).sge(r, 0, 8);
                r.close();
                refused(InvalidRequestException.class, "ibv_post_recv", Errno.EINVAL, () -> qp.postRecv(wrs), "closed");
                assertEquals(0, p.pendingRecvs());
            }
        }

        @Test
        void anSrqChainNamingARegionClosedAfterwardsIsRefusedAtPost() {
            SharedReceiveQueue srq = srq();
            MemoryRegion r = region(256, Access.LOCAL_WRITE);
            try (ReceiveWorkRequests wrs = new ReceiveWorkRequests(2, 1)) {
                wrs.add(1).sge(r, 0, 8);
                r.close();
                refused(
                        InvalidRequestException.class,
                        "ibv_post_srq_recv",
                        Errno.EINVAL,
                        () -> srq.postRecv(wrs),
                        "closed");
            }
        }

        private SharedReceiveQueue srq() {
            // the stand-in's SRQ, wrapped the way a borrowed object would be: created through the PD
            SharedReceiveQueue s = ForeignHandles.sharedReceiveQueue(pd, p.srq(), 8, 1);
            extra.add(s);
            return s;
        }

        @Test
        void aChainReusedAfterAnUnrelatedRegionClosedStillPosts() {
            MemoryRegion other = region(64);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                other.close(); // moves the revocation count: the chain is re-checked, and passes
                qp.postSend(wrs);
                assertEquals(1, p.wqeCount());
            }
        }

        @Test
        void aClosedSendChainIsRefusedAtPost() {
            SendWorkRequests wrs = new SendWorkRequests(2, 1);
            wrs.write(1, 0, 1).sge(mr, 0, 8);
            wrs.close();
            refused(ResourceClosedException.class, "ibv_post_send", Errno.EBADF, () -> qp.postSend(wrs), "closed");
        }

        @Test
        void aClosedReceiveChainIsRefusedAtPost() {
            ReceiveWorkRequests wrs = new ReceiveWorkRequests(2, 1);
            wrs.add(1).sge(mr, 0, 8);
            wrs.close();
            refused(ResourceClosedException.class, "ibv_post_recv", Errno.EBADF, () -> qp.postRecv(wrs), "closed");
        }

        @Test
        void aClosedCompletionArrayIsRefusedAtPoll() {
            WorkCompletions wcs = new WorkCompletions(4);
            wcs.close();
            refused(ResourceClosedException.class, "ibv_poll_cq", Errno.EBADF, () -> cq.poll(wcs), "closed");
            refused(
                    ResourceClosedException.class,
                    "ibv_poll_cq",
                    Errno.EBADF,
                    () -> cq.poll(wcs, 1, Duration.ofMillis(1)));
        }

        @Test
        void readingACompletionOutsideThePolledRangeIsRefused() {
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                refused(InvalidRequestException.class, "ibv_wc", Errno.EINVAL, () -> wcs.wrId(0), "does not exist");
                refused(InvalidRequestException.class, "ibv_wc", Errno.EINVAL, () -> wcs.status(-1));
                refused(InvalidRequestException.class, "ibv_wc", Errno.EINVAL, () -> wcs.byteLength(4));
            }
        }

        @Test
        void aRawHandleStopsWorkingWhenItsOwnerCloses() {
            QueuePair other = ForeignHandles.queuePair(
                    pd, p.makeQp(p.context(), 0x77, 2), QueuePairInit.of(QueuePairType.RC, cq), QueuePairState.RESET);
            MemorySegment raw = other.handle();
            assertEquals(0x77, raw.get(JAVA_INT, org.verbs4j.natives.ObjectLayout.QP_QP_NUM));
            other.close();
            assertThrows(IllegalStateException.class, () -> raw.get(JAVA_INT, 0), "no write through a dead handle");
            refused(ResourceClosedException.class, "QueuePair.handle", Errno.EBADF, other::handle);
        }

        @Test
        void aChainsRawViewStopsWorkingWhenTheChainCloses() {
            SendWorkRequests wrs = new SendWorkRequests(2, 1);
            MemorySegment raw = wrs.segment();
            raw.get(JAVA_INT, 0);
            wrs.close();
            assertThrows(IllegalStateException.class, () -> raw.set(JAVA_INT, 0, 1));
            refused(ResourceClosedException.class, "SendWorkRequests.segment", Errno.EBADF, wrs::segment);
        }

        @Test
        void aCompletionArraysRawViewStopsWorkingWhenItCloses() {
            WorkCompletions wcs = new WorkCompletions(2);
            MemorySegment raw = wcs.segment();
            wcs.close();
            assertThrows(IllegalStateException.class, () -> raw.set(JAVA_INT, 0, 1));
            refused(ResourceClosedException.class, "WorkCompletions.segment", Errno.EBADF, wcs::segment);
        }

        @Test
        void postingToAClosedQueuePairIsRefused() {
            qp.close();
            try (SendWorkRequests s = new SendWorkRequests(1, 1);
                    ReceiveWorkRequests r = new ReceiveWorkRequests(1, 1)) {
                s.write(1, 0, 1).sge(mr, 0, 8);
                r.add(1).sge(mr, 0, 8);
                refused(
                        ResourceClosedException.class,
                        "ibv_post_send",
                        Errno.EBADF,
                        () -> qp.postSend(s),
                        "queue pair is closed");
                refused(
                        ResourceClosedException.class,
                        "ibv_post_recv",
                        Errno.EBADF,
                        () -> qp.postRecv(r),
                        "queue pair is closed");
            }
        }

        @Test
        void pollingAClosedCompletionQueueIsRefused() {
            qp.close();
            cq.close();
            try (WorkCompletions wcs = new WorkCompletions(2)) {
                refused(
                        ResourceClosedException.class,
                        "ibv_poll_cq",
                        Errno.EBADF,
                        () -> cq.poll(wcs),
                        "completion queue is closed");
                refused(ResourceClosedException.class, "ibv_req_notify_cq", Errno.EBADF, () -> cq.requestNotify(false));
            }
        }

        @Test
        void closingACompletionQueueInUseIsRefused() {
            refused(ResourceBusyException.class, "ibv_destroy_cq", Errno.EBUSY, cq::close, "still has 1 open object");
            assertTrue(cq.isOpen());
        }

        @Test
        void closingAProtectionDomainWithARegionIsRefused() {
            qp.close();
            refused(ResourceBusyException.class, "ibv_dealloc_pd", Errno.EBUSY, pd::close);
            assertTrue(pd.isOpen());
        }

        @Test
        void closingAContextWithChildrenIsRefused() {
            refused(ResourceBusyException.class, "ibv_close_device", Errno.EBUSY, ctx::close);
        }

        @Test
        void aSecondCloseIsRefused() {
            MemoryRegion r = region(64);
            r.close();
            refused(ResourceClosedException.class, "ibv_dereg_mr", Errno.EBADF, r::close, "already closed");
        }

        @Test
        void aSecondCloseOfAChainOrArrayIsRefused() {
            SendWorkRequests s = new SendWorkRequests(1, 1);
            s.close();
            refused(ResourceClosedException.class, "SendWorkRequests.close", Errno.EBADF, s::close);
            WorkCompletions w = new WorkCompletions(1);
            w.close();
            refused(ResourceClosedException.class, "WorkCompletions.close", Errno.EBADF, w::close);
        }

        @Test
        void heapMemoryCannotBeRegistered() {
            refused(
                    InvalidRequestException.class,
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(MemorySegment.ofArray(new byte[64])),
                    "heap segment");
        }

        @Test
        void closeableArenaMemoryIsRefusedWithoutItsArena() {
            refused(
                    InvalidRequestException.class,
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.register(arena.allocate(64)),
                    "can be closed at any time",
                    "allocateMemoryRegion");
            try (Arena confined = Arena.ofConfined()) {
                refused(
                        InvalidRequestException.class,
                        "ibv_reg_mr",
                        Errno.EINVAL,
                        () -> pd.register(confined.allocate(64)),
                        "can be closed at any time");
            }
        }

        @Test
        void confinedArenaMemoryIsRefusedEvenWithItsArena() {
            try (Arena confined = Arena.ofConfined()) {
                refused(
                        InvalidRequestException.class,
                        "ibv_reg_mr",
                        Errno.EINVAL,
                        () -> pd.register(confined, confined.allocate(64)),
                        "confined arena");
            }
        }

        @Test
        void memoryOfAnotherArenaIsRefused() {
            try (Arena other = Arena.ofShared()) {
                refused(
                        InvalidRequestException.class,
                        "ibv_reg_mr",
                        Errno.EINVAL,
                        () -> pd.register(other, arena.allocate(64)),
                        "does not belong to the arena");
            }
        }

        @Test
        void aRegionOfNothingIsRefused() {
            refused(
                    InvalidRequestException.class,
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.allocateMemoryRegion(0),
                    "positive");
            refused(
                    InvalidRequestException.class,
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.allocateMemoryRegion(-4096),
                    "positive");
        }

        @Test
        void remoteWriteWithoutLocalWriteIsRefused() {
            refused(
                    InvalidRequestException.class,
                    "ibv_reg_mr",
                    Errno.EINVAL,
                    () -> pd.allocateMemoryRegion(4096, Access.REMOTE_WRITE),
                    "need LOCAL_WRITE");
        }

        @Test
        void aSharedArenaRunsLaterCloseActionsFirst() {
            // the property register(arena, ...) relies on: its deregistration, attached after the
            // allocation, runs before the allocation's free (measured here, not assumed)
            List<String> order = new java.util.ArrayList<>();
            Arena shared = Arena.ofShared();
            MemorySegment.ofAddress(1).reinterpret(shared, x -> order.add("free"));
            MemorySegment.ofAddress(1).reinterpret(shared, x -> order.add("dereg"));
            shared.close();
            assertEquals(List.of("dereg", "free"), order);
        }

        @Test
        void scopesAreClassifiedAsTheRegistrationRulesNeed() {
            // register() accepts exactly the scopes whose memory cannot be freed while referenced
            assertEquals(
                    "GlobalSession",
                    Arena.global().allocate(8).scope().getClass().getSimpleName());
            assertEquals(
                    "ImplicitSession",
                    Arena.ofAuto().allocate(8).scope().getClass().getSimpleName());
            assertEquals(
                    "GlobalSession",
                    MemorySegment.ofAddress(64)
                            .reinterpret(8)
                            .scope()
                            .getClass()
                            .getSimpleName());
            assertNotEquals(
                    "ImplicitSession", arena.allocate(8).scope().getClass().getSimpleName());
        }

        @Test
        void aUdRequestWithoutADestinationIsRefusedInEveryMode() {
            QueuePair ud = ForeignHandles.queuePair(
                    pd,
                    p.makeQp(p.context(), 0x99, QueuePairType.UD.value()),
                    QueuePairInit.of(QueuePairType.UD, cq),
                    QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                wrs.send(1).sge(mr, 0, 8).signaled();
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> ud.postSend(wrs),
                        "no destination");
                assertEquals(0, p.wqeCount(), "the provider never read a NULL address handle");
            } finally {
                ud.close();
            }
        }

        @Test
        void aRefusedAtomicLeavesTheChainAsItWas() {
            assumeTrue(Verbs.CHECKED, "alignment is a checked-mode rule");
            try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.fetchAndAdd(2, 0x1003, 1, 1),
                        "not 8-byte aligned");
                assertEquals(1, wrs.size());
                qp.postSend(wrs);
                assertEquals(1, p.wqeCount());
                assertEquals(SendWorkRequests.OP_RDMA_WRITE, p.wqe(0).opcode());
            }
        }

        @Test
        void aRefusedSgeLeavesTheChainAsItWas() {
            try (SendWorkRequests wrs = new SendWorkRequests(4, 2)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).sge(mr, 8, 8);
                refused(VerbsException.class, "ibv_post_send", Errno.EINVAL, () -> wrs.sge(mr, 16, 8), "SGEs");
                qp.postSend(wrs.signaled());
                assertEquals(1, p.wqeCount());
                assertEquals(2, p.wqe(0).numSge());
                assertEquals(16, p.wqe(0).totalLength());
            }
        }

        @Test
        void aRefusedRequestOnAFullChainLeavesItAsItWas() {
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                refused(QueueFullException.class, "ibv_post_send", Errno.ENOMEM, () -> wrs.send(2), "capacity of 1");
                assertEquals(1, wrs.size());
                qp.postSend(wrs);
                assertEquals(1, p.wqe(0).wrId());
            }
        }

        @Test
        void aReceiveSgeWithoutARequestIsRefused() {
            try (ReceiveWorkRequests wrs = new ReceiveWorkRequests(2, 1)) {
                refused(
                        InvalidRequestException.class,
                        "ibv_post_recv",
                        Errno.EINVAL,
                        () -> wrs.sge(mr, 0, 8),
                        "add(wrId) first");
                assertEquals(0, wrs.size());
            }
        }

        @Test
        void aSendSgeWithoutARequestIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> wrs.sge(mr, 0, 8),
                        "start a work request");
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        wrs::signaled,
                        "start a work request");
            }
        }

        @Test
        void chainsOfNothingAreRefusedAtConstruction() {
            refused(
                    InvalidRequestException.class,
                    "SendWorkRequests",
                    Errno.EINVAL,
                    () -> new SendWorkRequests(0, 1),
                    "capacity 0");
            refused(
                    InvalidRequestException.class,
                    "ReceiveWorkRequests",
                    Errno.EINVAL,
                    () -> new ReceiveWorkRequests(4, 0),
                    "maxSgePerRequest 0");
            refused(
                    InvalidRequestException.class,
                    "SendWorkRequests",
                    Errno.EINVAL,
                    () -> new SendWorkRequests(1 << 20, 1 << 10),
                    "at most 2^26");
            refused(
                    InvalidRequestException.class,
                    "WorkCompletions",
                    Errno.EINVAL,
                    () -> new WorkCompletions(0),
                    "capacity 0");
            refused(
                    InvalidRequestException.class,
                    "SendWorkRequests",
                    Errno.EINVAL,
                    () -> new SendWorkRequests(1, 1, -1),
                    "maxInlinePerRequest -1");
        }

        @Test
        void anEmptyChainPostsNothing() {
            try (SendWorkRequests s = new SendWorkRequests(1, 1);
                    ReceiveWorkRequests r = new ReceiveWorkRequests(1, 1)) {
                qp.postSend(s);
                qp.postRecv(r);
                assertEquals(0, p.calls(StandInProvider.Op.POST_SEND));
                assertEquals(0, p.calls(StandInProvider.Op.POST_RECV));
            }
        }
    }

    // ---- threads ------------------------------------------------------------------------------

    @Nested
    class Threads extends Bed {
        private static final long RUN_NANOS = 300_000_000L;

        /** Runs {@code body} on {@code threads} threads for a while; returns what they threw that was not a VerbsException. */
        private List<Throwable> race(int threads, ThrowingRunnable... bodies) throws InterruptedException {
            ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            Thread[] ts = new Thread[threads];
            for (int i = 0; i < threads; i++) {
                ThrowingRunnable body = bodies[i % bodies.length];
                ts[i] = Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                        body.run();
                    } catch (VerbsException expected) {
                        // a defined outcome
                    } catch (Throwable t) {
                        unexpected.add(t);
                    }
                });
            }
            start.countDown();
            for (Thread t : ts) {
                t.join(10_000);
                assertFalse(t.isAlive(), "a racing thread hung");
            }
            return List.copyOf(unexpected);
        }

        interface ThrowingRunnable {
            void run() throws Exception;
        }

        @Test
        void twoThreadsPollingOneQueueGetBusyNotCorruption() throws InterruptedException {
            AtomicLong reaped = new AtomicLong();
            AtomicLong busy = new AtomicLong();
            int n = 4000;
            for (int i = 0; i < n; i++) {
                p.queueCompletion(i, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777); // a QP verbs4j does not track
            }
            ThrowingRunnable poller = () -> {
                try (WorkCompletions wcs = new WorkCompletions(7)) {
                    long end = System.nanoTime() + RUN_NANOS;
                    while (System.nanoTime() < end && reaped.get() < n) {
                        try {
                            reaped.addAndGet(cq.poll(wcs));
                        } catch (ResourceBusyException e) {
                            busy.incrementAndGet();
                        }
                    }
                }
            };
            assertEquals(List.of(), race(2, poller));
            try (WorkCompletions wcs = new WorkCompletions(64)) {
                reaped.addAndGet(drain(wcs));
            }
            assertEquals(n, reaped.get(), "every completion reaped exactly once");
        }

        @Test
        void closeRacingAPollWaitsForIt() throws InterruptedException {
            qp.close();
            CompletionQueue other = ForeignHandles.completionQueue(ctx, p.makeCq(p.context(), 64));
            AtomicBoolean closed = new AtomicBoolean();
            ThrowingRunnable poller = () -> {
                try (WorkCompletions wcs = new WorkCompletions(4)) {
                    long end = System.nanoTime() + RUN_NANOS;
                    while (System.nanoTime() < end) {
                        other.poll(wcs); // ends with ResourceClosedException once the close went through
                    }
                }
            };
            ThrowingRunnable closer = () -> {
                Thread.sleep(20);
                other.close();
                closed.set(true);
            };
            assertEquals(List.of(), race(2, poller, closer));
            assertTrue(closed.get());
            assertFalse(other.isOpen());
        }

        @Test
        void closeRacingAPostWaitsForIt() throws InterruptedException {
            QueuePair other = ForeignHandles.queuePair(
                    pd, p.makeQp(p.context(), 0x55, 2), QueuePairInit.of(QueuePairType.RC, cq), QueuePairState.RTS);
            ThrowingRunnable poster = () -> {
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
                    wrs.write(1, 0x1000, 1).sge(mr, 0, 8);
                    long end = System.nanoTime() + RUN_NANOS;
                    while (System.nanoTime() < end) {
                        other.postSend(wrs); // unsignaled; ResourceClosedException once closed (or QueueFull)
                    }
                }
            };
            ThrowingRunnable closer = () -> {
                Thread.sleep(20);
                other.close();
            };
            assertEquals(List.of(), race(2, poster, closer));
            assertFalse(other.isOpen());
        }

        @Test
        void twoThreadsPostingToOneSendQueueGetBusyNotCorruption() throws InterruptedException {
            AtomicLong busy = new AtomicLong();
            AtomicLong posted = new AtomicLong();
            ThrowingRunnable poster = () -> {
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                        WorkCompletions wcs = new WorkCompletions(16)) {
                    wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                    long end = System.nanoTime() + RUN_NANOS;
                    while (System.nanoTime() < end) {
                        try {
                            qp.postSend(wrs);
                            posted.incrementAndGet();
                        } catch (ResourceBusyException e) {
                            busy.incrementAndGet();
                        } catch (QueueFullException e) {
                            try {
                                cq.poll(wcs);
                            } catch (ResourceBusyException e2) {
                                busy.incrementAndGet();
                            }
                        }
                    }
                }
            };
            assertEquals(List.of(), race(2, poster));
            assertEquals(posted.get(), p.wqeCount(), "every accepted post reached the provider once");
        }

        @Test
        void aCompletionArrayClosedWhileAnotherThreadPollsIntoItDoesNotCrash() throws InterruptedException {
            WorkCompletions shared = new WorkCompletions(8);
            for (int i = 0; i < 2000; i++) {
                p.queueCompletion(i, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
            }
            ThrowingRunnable poller = () -> {
                long end = System.nanoTime() + RUN_NANOS;
                while (System.nanoTime() < end) {
                    cq.poll(shared);
                }
            };
            ThrowingRunnable closer = () -> {
                Thread.sleep(10);
                shared.close();
            };
            assertEquals(List.of(), race(2, poller, closer));
        }

        @Test
        void aChainClosedWhileAnotherThreadPostsItDoesNotCrash() throws InterruptedException {
            SendWorkRequests shared = new SendWorkRequests(1, 1);
            shared.write(1, 0x1000, 1).sge(mr, 0, 8);
            ThrowingRunnable poster = () -> {
                long end = System.nanoTime() + RUN_NANOS;
                while (System.nanoTime() < end) {
                    qp.postSend(shared);
                }
            };
            ThrowingRunnable closer = () -> {
                Thread.sleep(10);
                shared.close();
            };
            assertEquals(List.of(), race(2, poster, closer));
        }

        @Test
        void aRegionClosedWhileAnotherThreadPostsFromItIsRefusedAfterTheClose() throws InterruptedException {
            MemoryRegion r = region(256, Access.LOCAL_WRITE);
            AtomicBoolean closeReturned = new AtomicBoolean();
            AtomicLong postedAfterClose = new AtomicLong();
            ThrowingRunnable poster = () -> {
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
                    wrs.write(1, 0x1000, 1).sge(r, 0, 8);
                    long end = System.nanoTime() + RUN_NANOS;
                    while (System.nanoTime() < end) {
                        boolean after = closeReturned.get();
                        try {
                            qp.postSend(wrs);
                            if (after) {
                                postedAfterClose.incrementAndGet();
                            }
                        } catch (QueueFullException e) {
                            // unsignaled sends fill the queue: not this case's point
                            qp.account.reset();
                        }
                    }
                }
            };
            ThrowingRunnable closer = () -> {
                Thread.sleep(10);
                r.close();
                closeReturned.set(true);
            };
            assertEquals(List.of(), race(2, poster, closer));
            assertEquals(0, postedAfterClose.get(), "no post named the region once its close had returned");
        }

        private static void rethrow(Throwable t) throws Throwable {
            if (t != null) {
                throw t;
            }
        }

        /** Runs {@code body} on a new platform thread and returns what it threw, or null. */
        private Throwable onAnotherThread(ThrowingRunnable body) throws InterruptedException {
            java.util.concurrent.atomic.AtomicReference<Throwable> thrown =
                    new java.util.concurrent.atomic.AtomicReference<>();
            Thread t = Thread.ofPlatform().name("not-the-owner").start(() -> {
                try {
                    body.run();
                } catch (Throwable e) {
                    thrown.set(e);
                }
            });
            t.join(10_000);
            assertFalse(t.isAlive(), "the other thread hung");
            return thrown.get();
        }

        @Test
        void aConfinedQueuePolledFromAnotherThreadIsRefused() throws InterruptedException {
            qp.close();
            CompletionQueue confined = ForeignHandles.confinedCompletionQueue(ctx, p.makeCq(p.context(), 64));
            extra.add(confined);
            assertTrue(confined.isConfined());
            assertEquals(Thread.currentThread(), confined.ownerThread());
            p.queueCompletion(7, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
            long pollsBefore = p.calls(StandInProvider.Op.POLL_CQ);
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                refused(
                        ResourceBusyException.class,
                        "ibv_poll_cq",
                        Errno.EBUSY,
                        () -> rethrow(onAnotherThread(() -> confined.poll(wcs))),
                        "confined to thread");
                Throwable poll = onAnotherThread(() -> confined.poll(wcs));
                Throwable pollMin = onAnotherThread(() -> confined.poll(wcs, 1, java.time.Duration.ofMillis(50)));
                Throwable arm = onAnotherThread(() -> confined.requestNotify(false));
                assertEquals(pollsBefore, p.calls(StandInProvider.Op.POLL_CQ), "no refused call reached the provider");
                for (Throwable t : new Throwable[] {poll, pollMin, arm}) {
                    ResourceBusyException e = assertInstanceOf(ResourceBusyException.class, t);
                    assertEquals(Errno.EBUSY, e.errno());
                    assertTrue(
                            e.getMessage()
                                    .contains("confined to thread \""
                                            + Thread.currentThread().getName() + "\""),
                            e.getMessage());
                    assertTrue(e.getMessage().contains("used from thread \"not-the-owner\""), e.getMessage());
                }
                assertEquals("ibv_poll_cq", ((VerbsException) poll).verb());
                assertEquals("ibv_req_notify_cq", ((VerbsException) arm).verb());
                assertEquals(1, confined.poll(wcs), "its owner still polls it");
                assertEquals(7, wcs.wrId(0));
            }
        }

        @Test
        void aConfinedQueueClosedFromAnotherThreadWhileItsOwnerRunsIsRefused() throws InterruptedException {
            qp.close();
            CompletionQueue confined = ForeignHandles.confinedCompletionQueue(ctx, p.makeCq(p.context(), 64));
            extra.add(confined);
            refused(
                    ResourceBusyException.class,
                    "ibv_destroy_cq",
                    Errno.EBUSY,
                    () -> rethrow(onAnotherThread(confined::close)),
                    "which is still running",
                    "after it has ended");
            assertTrue(confined.isOpen(), "a refused close leaves it open");
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                p.queueCompletion(8, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
                assertEquals(1, confined.poll(wcs));
                confined.close(); // its owner may
                refused(
                        ResourceClosedException.class,
                        "ibv_poll_cq",
                        Errno.EBADF,
                        () -> confined.poll(wcs),
                        "is closed");
                assertInstanceOf(
                        ResourceClosedException.class,
                        onAnotherThread(() -> confined.poll(wcs)),
                        "closed wins over the wrong thread");
            }
        }

        @Test
        void aConfinedQueueClosedFromAnotherThreadAfterItsOwnerEndedRefusesLaterPolls() throws InterruptedException {
            qp.close();
            java.util.concurrent.atomic.AtomicReference<CompletionQueue> made =
                    new java.util.concurrent.atomic.AtomicReference<>();
            p.queueCompletion(9, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
            assertNull(onAnotherThread(() -> {
                CompletionQueue c = ForeignHandles.confinedCompletionQueue(ctx, p.makeCq(p.context(), 64));
                made.set(c);
                try (WorkCompletions wcs = new WorkCompletions(4)) {
                    if (c.poll(wcs) != 1 || wcs.wrId(0) != 9) {
                        throw new AssertionError("the owner thread did not reap its completion");
                    }
                }
            }));
            CompletionQueue confined = made.get();
            extra.add(confined);
            assertFalse(confined.ownerThread().isAlive());
            assertDoesNotThrow(confined::close, "the owner has ended: no poll can be inside the provider");
            assertFalse(confined.isOpen());
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                refused(
                        ResourceClosedException.class,
                        "ibv_poll_cq",
                        Errno.EBADF,
                        () -> confined.poll(wcs),
                        "is closed");
            }
        }

        @Test
        void aCloseFromAnotherThreadRacingTheOwnersPollsIsRefused() throws InterruptedException {
            qp.close();
            CompletionQueue confined = ForeignHandles.confinedCompletionQueue(ctx, p.makeCq(p.context(), 64));
            extra.add(confined);
            int n = 3000;
            for (int i = 0; i < n; i++) {
                p.queueCompletion(i, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
            }
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong refusedCloses = new AtomicLong();
            ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
            Thread closer = Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    try {
                        confined.close();
                        unexpected.add(new AssertionError("a close from another thread went through"));
                        return;
                    } catch (ResourceBusyException e) {
                        refusedCloses.incrementAndGet();
                    } catch (Throwable t) {
                        unexpected.add(t);
                        return;
                    }
                }
            });
            long reaped = 0;
            try (WorkCompletions wcs = new WorkCompletions(3)) {
                long end = System.nanoTime() + 5_000_000_000L;
                while ((reaped < n || refusedCloses.get() < 100) && System.nanoTime() < end) {
                    reaped +=
                            confined.poll(wcs); // polls on (reaping nothing) until the closer has been refused a while
                }
            } finally {
                stop.set(true);
                closer.join(10_000);
            }
            assertEquals(List.of(), List.copyOf(unexpected));
            assertEquals(n, reaped, "every completion reaped exactly once by the owner");
            assertTrue(refusedCloses.get() >= 100, "closes refused while the owner polled: " + refusedCloses.get());
            assertTrue(confined.isOpen());
        }

        @Test
        void concurrentClosesCloseOnce() throws InterruptedException {
            MemoryRegion r = region(64);
            AtomicLong ok = new AtomicLong();
            AtomicLong refused = new AtomicLong();
            ThrowingRunnable closer = () -> {
                try {
                    r.close();
                    ok.incrementAndGet();
                } catch (ResourceClosedException e) {
                    refused.incrementAndGet();
                }
            };
            assertEquals(List.of(), race(4, closer));
            assertEquals(1, ok.get());
            assertEquals(3, refused.get());
        }

        @Test
        void creatingAChildWhileItsParentClosesHasOneOutcome() throws InterruptedException {
            qp.close();
            mr.close();
            AtomicLong created = new AtomicLong();
            ConcurrentLinkedQueue<MemoryRegion> regions = new ConcurrentLinkedQueue<>();
            ThrowingRunnable creator = () -> {
                for (int i = 0; i < 200; i++) {
                    MemoryRegion r;
                    try {
                        r = ForeignHandles.memoryRegion(pd, arena.allocate(64), 1, 2, EnumSet.noneOf(Access.class));
                    } catch (ResourceClosedException e) {
                        assertFalse(pd.isOpen(), e.getMessage()); // the close won: no child of a closed parent
                        return;
                    }
                    regions.add(r);
                    created.incrementAndGet();
                }
            };
            ThrowingRunnable closer = () -> {
                for (int i = 0; i < 200 && pd.isOpen(); i++) {
                    try {
                        pd.close();
                    } catch (ResourceBusyException e) {
                        MemoryRegion r;
                        while ((r = regions.poll()) != null) {
                            r.close();
                        }
                    }
                }
            };
            assertEquals(List.of(), race(2, creator, closer));
            for (MemoryRegion r : regions) {
                assertTrue(pd.isOpen() || !r.isOpen(), "an open region of a closed protection domain: " + r);
                if (r.isOpen()) {
                    r.close();
                }
            }
            assertTrue(created.get() > 0 || !pd.isOpen(), "neither a region was created nor the domain closed");
        }
    }

    // ---- accounting (checked mode) -----------------------------------------------------------

    @Nested
    class Accounting extends Bed {
        @BeforeEach
        void checkedOnly() {
            assumeTrue(Verbs.CHECKED, "checked mode accounts for outstanding work");
        }

        @Test
        void unsignaledSendsBeyondTheSendQueueAreRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8);
                for (int i = 0; i < 16; i++) {
                    qp.postSend(wrs);
                }
                refused(
                        QueueFullException.class,
                        "ibv_post_send",
                        Errno.ENOSPC,
                        () -> qp.postSend(wrs),
                        "send queue of 16 holds 16",
                        "signal at least every");
                assertEquals(16, p.wqeCount());
            }
        }

        @Test
        void aSignaledCompletionGivesBackTheSlotsOfTheUnsignaledOnesBeforeIt() {
            try (SendWorkRequests wrs = new SendWorkRequests(16, 1);
                    WorkCompletions wcs = new WorkCompletions(4)) {
                for (int i = 0; i < 16; i++) {
                    wrs.write(i, 0x1000, 1).sge(mr, 0, 8);
                }
                wrs.signaled(); // only the last
                qp.postSend(wrs);
                assertEquals(16, qp.sendOutstanding());
                assertEquals(1, cq.poll(wcs));
                assertEquals(0, qp.sendOutstanding());
                qp.postSend(wrs);
            }
        }

        @Test
        void eachCompletionCreditsItsOwnQueuePairAlsoWhenAQpNumberComesBack() {
            QueuePair b = ForeignHandles.queuePair(
                    pd,
                    p.makeQp(p.context(), 0x77, 2),
                    QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(4).maxRecvWr(4),
                    QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                    WorkCompletions wcs = new WorkCompletions(16)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                for (int i = 0; i < 4; i++) { // the two QPs' completions alternate within one poll
                    qp.postSend(wrs);
                    b.postSend(wrs);
                }
                assertEquals(4, qp.sendOutstanding());
                assertEquals(4, b.sendOutstanding());
                assertEquals(8, cq.poll(wcs));
                assertEquals(0, qp.sendOutstanding());
                assertEquals(0, b.sendOutstanding());
                for (QueuePair q : List.of(qp, qp, b, qp, b, b)) { // one completion per poll, QP after QP; b last
                    q.postSend(wrs);
                    assertEquals(1, q.sendOutstanding());
                    assertEquals(1, cq.poll(wcs));
                    assertEquals(0, q.sendOutstanding());
                }
                // b closes and a new QP gets its number: its completions credit it, not the closed one
                b.close();
                QueuePair c = ForeignHandles.queuePair(
                        pd,
                        p.makeQp(p.context(), 0x77, 2),
                        QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(4).maxRecvWr(4),
                        QueuePairState.RTS);
                try {
                    for (int round = 0; round < 3; round++) {
                        for (int i = 0; i < 4; i++) {
                            c.postSend(wrs);
                        }
                        assertEquals(4, cq.poll(wcs));
                        assertEquals(0, c.sendOutstanding(), "round " + round);
                    }
                } finally {
                    c.close();
                }
            } finally {
                if (b.isOpen()) {
                    b.close();
                }
            }
        }

        @Test
        void aChainLongerThanTheSendQueueIsRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(17, 1)) {
                for (int i = 0; i < 17; i++) {
                    wrs.write(i, 0x1000, 1).sge(mr, 0, 8);
                }
                refused(
                        QueueFullException.class,
                        "ibv_post_send",
                        Errno.ENOSPC,
                        () -> qp.postSend(wrs),
                        "exceeds the send queue");
            }
        }

        @Test
        void receivesBeyondTheReceiveQueueAreRefusedUntilPolled() {
            try (ReceiveWorkRequests wrs = new ReceiveWorkRequests(1, 1);
                    WorkCompletions wcs = new WorkCompletions(4)) {
                wrs.add(1).sge(mr, 0, 8);
                for (int i = 0; i < 16; i++) {
                    qp.postRecv(wrs);
                }
                refused(
                        QueueFullException.class,
                        "ibv_post_recv",
                        Errno.ENOSPC,
                        () -> qp.postRecv(wrs),
                        "receive queue of 16");
                p.deliverRecv(8, false, 0);
                assertEquals(1, cq.poll(wcs));
                qp.postRecv(wrs);
            }
        }

        @Test
        void anOvercommittedCompletionQueueRefusesWhatCouldOverrunIt() {
            CompletionQueue small = ForeignHandles.completionQueue(ctx, p.makeCq(p.context(), 8));
            QueuePair q = ForeignHandles.queuePair(
                    pd,
                    p.makeQp(p.context(), 0x66, 2),
                    QueuePairInit.of(QueuePairType.RC, small).maxSendWr(16).maxRecvWr(16),
                    QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                    WorkCompletions wcs = new WorkCompletions(8)) {
                assertTrue(small.isOvercommitted());
                assertFalse(cq.isOvercommitted());
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                for (int i = 0; i < 8; i++) {
                    q.postSend(wrs);
                }
                refused(
                        QueueFullException.class,
                        "ibv_post_send",
                        Errno.ENOSPC,
                        () -> q.postSend(wrs),
                        "completion queue of 8 entries",
                        "overrun");
                assertEquals(8, small.poll(wcs));
                q.postSend(wrs);
            } finally {
                q.close();
                small.close();
            }
        }

        @Test
        void afterAnErrorCompletionPostsAreRefused() {
            try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                    WorkCompletions wcs = new WorkCompletions(4)) {
                wrs.write(1, 0x1000, 1).sge(mr, 0, 8).signaled();
                qp.postSend(wrs);
                p.reset();
                p.queueCompletion(
                        1, CompletionStatus.REM_ACCESS_ERR, CompletionOpcode.RDMA_WRITE, 0, StandInProvider.QP_NUM);
                assertEquals(1, cq.poll(wcs));
                refused(
                        InvalidRequestException.class,
                        "ibv_post_send",
                        Errno.EINVAL,
                        () -> qp.postSend(wrs),
                        "queue pair is in error",
                        "reset()");
            }
        }

        @Test
        void aPartlyPostedChainCountsWhatWasPosted() {
            try (SendWorkRequests wrs = new SendWorkRequests(8, 1)) {
                for (int i = 0; i < 8; i++) {
                    wrs.write(i, 0x1000, 1).sge(mr, 0, 8);
                }
                p.failPostAt(3, Errno.ENOMEM);
                assertThrows(VerbsException.class, () -> qp.postSend(wrs));
                assertEquals(3, qp.sendOutstanding());
            }
        }

        @Test
        void anSrqRefusesMoreThanItHolds() {
            SharedReceiveQueue srq = ForeignHandles.sharedReceiveQueue(pd, p.srq(), 4, 1);
            try (ReceiveWorkRequests wrs = new ReceiveWorkRequests(1, 1)) {
                wrs.add(1).sge(mr, 0, 8);
                for (int i = 0; i < 4; i++) {
                    srq.postRecv(wrs);
                }
                refused(
                        QueueFullException.class,
                        "ibv_post_srq_recv",
                        Errno.ENOSPC,
                        () -> srq.postRecv(wrs),
                        "shared receive queue of 4");
            } finally {
                srq.close();
            }
        }
    }

    // ---- restricted escape hatches -------------------------------------------------------------

    @Test
    void escapeHatchesNeedNativeAccess() throws Exception {
        // a JVM without --enable-native-access: the escape hatches refuse, naming the grant to add
        String javaCmd = ProcessHandle.current().info().command().orElseThrow();
        Process proc = new ProcessBuilder(
                        javaCmd,
                        "-cp",
                        System.getProperty("java.class.path"),
                        "org.verbs4j.MisuseCatalogueTest$NoNativeAccess")
                .redirectErrorStream(true)
                .start();
        String out = new String(proc.getInputStream().readAllBytes());
        assertTrue(proc.waitFor(60, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, proc.exitValue(), out);
        assertTrue(out.contains("REFUSED ForeignHandles.context EPERM --enable-native-access=ALL-UNNAMED"), out);
        assertTrue(out.contains("REFUSED SendWorkRequests.segment EPERM"), out);
        assertTrue(out.contains("REFUSED WorkCompletions.segment EPERM"), out);
    }

    /** Run without native access by {@link #escapeHatchesNeedNativeAccess}. */
    static final class NoNativeAccess {
        public static void main(String[] args) {
            assertFalse(NoNativeAccess.class.getModule().isNativeAccessEnabled());
            report(() -> ForeignHandles.context(MemorySegment.NULL, "x"));
            report(() -> new SendWorkRequests(1, 1).segment());
            report(() -> new WorkCompletions(1).segment());
        }

        private static void report(Executable call) {
            try {
                call.execute();
                System.out.println("ALLOWED");
            } catch (RestrictedMethodException e) {
                System.out.println("REFUSED " + e.verb() + " " + e.errnoName() + " "
                        + (e.getMessage().contains("--enable-native-access=ALL-UNNAMED")
                                ? "--enable-native-access=ALL-UNNAMED"
                                : ""));
            } catch (Throwable t) {
                System.out.println("OTHER " + t);
            }
        }
    }

    @Test
    void everyFailureIsAVerbsException() {
        // the hierarchy: each kind a subclass, each carrying verb and errno
        assertInstanceOf(ResourceClosedException.class, VerbsException.create("v", Errno.EBADF, null, null));
        assertInstanceOf(ResourceBusyException.class, VerbsException.create("v", Errno.EBUSY, null, null));
        assertInstanceOf(VerbsTimeoutException.class, VerbsException.create("v", Errno.ETIMEDOUT, null, null));
        assertInstanceOf(DeviceUnavailableException.class, VerbsException.create("v", Errno.ENODEV, null, null));
        assertInstanceOf(InvalidRequestException.class, VerbsException.create("v", Errno.EFAULT, null, null));
        assertInstanceOf(RestrictedMethodException.class, VerbsException.create("v", Errno.EPERM, null, null));
        assertEquals(
                VerbsException.class,
                VerbsException.create("v", Errno.EIO, null, null).getClass());
        // and the native layer makes the same ones (the installed FailureFactory)
        assertInstanceOf(ResourceBusyException.class, org.verbs4j.natives.Failures.of("ibv_dealloc_pd", Errno.EBUSY));
        assertDoesNotThrow(() -> VerbsException.of("v", 0));
    }
}
