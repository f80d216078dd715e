package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.GuestSupport.assertAll;
import static org.verbs4j.GuestSupport.awaitAny;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;

/**
 * The misuse catalogue on a real device (rxe0 in the guest): the cases that went wrong when the
 * library was tried adversarially, each with its documented outcome, through the public API.
 */
@RdmaTest
@org.junit.jupiter.api.Tag("unchecked") // also run by the guest tier's unchecked JVM
class MemorySafetyGuestTest {

    @Test
    void aReceiveIntoARegionWhoseArenaClosedIsRevokedNotWrittenIntoNewMemory() {
        try (LoopbackPair pair = LoopbackPair.rc();
                MemoryRegion src = pair.pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
                SendWorkRequests sends = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            src.segment().fill((byte) 0x33);
            Arena arena = Arena.ofShared();
            MemoryRegion dst = pair.pd.register(arena, arena.allocate(4096, 4096), Access.LOCAL_WRITE);
            pair.b.postRecv(recvs.add(1).sge(dst, 0, 4096));
            int before = GuestSupport.resourceCounts(pair.context.deviceName()).get("mr");
            arena.close(); // deregisters the region first, then frees its memory
            assertFalse(dst.isOpen(), "closing the arena closed the region");
            assertEquals(
                    before - 1,
                    GuestSupport.resourceCounts(pair.context.deviceName()).get("mr"));
            try (Arena fresh = Arena.ofShared()) {
                MemorySegment reused = fresh.allocate(4096, 4096); // malloc may hand out the same pages again
                reused.fill((byte) 0);
                pair.a.postSend(sends.send(2).sge(src, 0, 4096).signaled());
                awaitAny(pair.cqB, wcs, 1);
                assertEquals(1, wcs.wrId(0));
                assertNotEquals(
                        CompletionStatus.SUCCESS, wcs.status(0), "the revoked receive must fail: " + wcs.statusText(0));
                assertAll(reused, (byte) 0, "the new allocation was not written into");
                awaitAny(pair.cqA, wcs, 1);
            }
        }
    }

    @Test
    void aThousandSinglePostsOnASixteenDeepQueueLoseNoCompletion() {
        try (LoopbackPair pair = LoopbackPair.open(
                        QueuePairType.RC, EnumSet.of(Access.REMOTE_WRITE), init -> init.maxSendWr(16));
                MemoryRegion mr = pair.pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(64)) {
            int accepted = 0;
            int refused = 0;
            Set<Long> completed = new HashSet<>();
            for (int i = 0; i < 1000; i++) {
                try {
                    pair.a.postSend(wrs.clear()
                            .write(i, mr.address(), mr.rkey())
                            .sge(mr, 0, 64)
                            .signaled());
                    accepted++;
                } catch (QueueFullException e) {
                    assertTrue(Verbs.CHECKED);
                    refused++;
                    assertTrue(e.getMessage().contains("send queue of 16"), e.getMessage());
                }
            }
            if (Verbs.CHECKED) {
                assertEquals(pair.a.maxSendWr(), accepted, "exactly the queue's depth was accepted without polling");
                assertEquals(1000 - accepted, refused);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            AsyncErrorException overrun = null;
            while (completed.size() < accepted && System.nanoTime() < deadline && overrun == null) {
                int n;
                try {
                    n = pair.cqA.poll(wcs);
                } catch (AsyncErrorException e) {
                    overrun = e; // unchecked mode: the overrun is reported, never silent
                    continue;
                }
                for (int i = 0; i < n; i++) {
                    assertTrue(wcs.isSuccess(i), wcs.statusText(i));
                    assertTrue(completed.add(wcs.wrId(i)), "wr_id " + wcs.wrId(i) + " completed twice");
                }
            }
            if (Verbs.CHECKED) {
                assertEquals(accepted, completed.size(), "every accepted post completed exactly once");
            } else {
                assertTrue(
                        completed.size() == accepted
                                || (overrun != null && overrun.getMessage().contains("IBV_EVENT_CQ_ERR")),
                        "either every completion arrived or the loss was reported: " + completed.size() + " of "
                                + accepted);
            }
        }
    }

    @Test
    void postsFromAnotherThreadSeeAClosedRegionAsRefusedAndTheJvmSurvives() throws InterruptedException {
        try (LoopbackPair pair = LoopbackPair.rc();
                MemoryRegion remote = pair.pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            MemoryRegion local = pair.pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
            ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
            AtomicBoolean closed = new AtomicBoolean();
            Thread poster = Thread.ofPlatform().start(() -> {
                try (SendWorkRequests wrs = new SendWorkRequests(1, 1);
                        WorkCompletions wcs = new WorkCompletions(16)) {
                    wrs.write(1, remote.address(), remote.rkey())
                            .sge(local, 0, 256)
                            .signaled();
                    long end = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                    while (System.nanoTime() < end) {
                        boolean after = closed.get();
                        try {
                            pair.a.postSend(wrs);
                            if (after) {
                                unexpected.add(new AssertionError("posted after the region's close returned"));
                            }
                        } catch (InvalidRequestException | QueueFullException expected) {
                            // refused: closed region, the QP in error after a revoked request, or a full queue
                        }
                        pair.cqA.poll(wcs);
                    }
                } catch (Throwable t) {
                    unexpected.add(t);
                }
            });
            Thread.sleep(300);
            local.close();
            closed.set(true);
            poster.join(20_000);
            assertFalse(poster.isAlive());
            assertEquals(List.of(), List.copyOf(unexpected));
        }
    }

    @Test
    void aUdChainNamingAClosedAddressHandleIsRefused() {
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(64);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cq));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cq));
                MemoryRegion mr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE);
                SendWorkRequests wrs = new SendWorkRequests(1, 1)) {
            a.activateUd(1, 0x1111, 1);
            b.activateUd(1, 0x1111, 2);
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            AddressHandle ah = pd.createAddressHandle(new AddressVector(1, 0, gid.gid(), gid.index(), 64, 0, 0));
            wrs.send(1).sge(mr, 0, 64).destination(ah, b.qpNumber(), 0x1111).signaled();
            ah.close();
            InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> a.postSend(wrs));
            assertTrue(e.getMessage().contains("address handle that was closed"), e.getMessage());
            assertThrows(
                    ResourceClosedException.class, () -> wrs.clear().send(2).destination(ah, 1, 1));
        }
    }

    @Test
    void droppedObjectsOfEveryKindAreReclaimed() throws InterruptedException {
        String device;
        Map<String, Integer> before;
        try (Context probe = LoopbackPair.openTestDevice()) {
            device = probe.deviceName();
        }
        before = settledCounts(device); // what earlier tests dropped is collected first
        dropEverything();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        Map<String, Integer> now = GuestSupport.resourceCounts(device);
        while (!now.equals(before) && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(200);
            now = GuestSupport.resourceCounts(device);
        }
        assertEquals(before, now, "rdma res show is back where it was once everything dropped was collected");
    }

    private static Map<String, Integer> settledCounts(String device) throws InterruptedException {
        Map<String, Integer> last = GuestSupport.resourceCounts(device);
        for (int stable = 0, i = 0; stable < 3 && i < 100; i++) {
            System.gc();
            Thread.sleep(200);
            Map<String, Integer> now = GuestSupport.resourceCounts(device);
            stable = now.equals(last) ? stable + 1 : 0;
            last = now;
        }
        return last;
    }

    private static void dropEverything() {
        Context ctx = LoopbackPair.openTestDevice();
        ProtectionDomain pd = ctx.allocateProtectionDomain();
        CompletionChannel channel = ctx.createCompletionChannel();
        CompletionQueue cq = ctx.createCompletionQueue(16, channel, 0);
        CompletionQueue cq2 = ctx.createCompletionQueue(16);
        SharedReceiveQueue srq = pd.createSharedReceiveQueue(16, 1);
        pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq2).sharedReceiveQueue(srq));
        pd.createQueuePair(QueuePairInit.of(QueuePairType.UD, cq));
        pd.allocateMemoryRegion(8192, Access.LOCAL_WRITE);
        pd.register(Arena.ofAuto().allocate(8192), Access.LOCAL_WRITE);
        GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        pd.createAddressHandle(new AddressVector(1, 0, gid.gid(), gid.index(), 64, 0, 0));
        new SendWorkRequests(4, 1);
        new WorkCompletions(4);
    }
}
