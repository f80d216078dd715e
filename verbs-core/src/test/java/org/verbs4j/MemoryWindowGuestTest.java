package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.awaitAny;
import static org.verbs4j.GuestSupport.awaitSuccess;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): memory windows on a real provider. Side A owns a region and binds a type 2
 * window to one page of it (through {@code ibv_wr_bind_mw} on an extended queue pair, and through
 * a classic {@code IBV_WR_BIND_MW} work request); side B writes through the window's rkey. After a
 * local invalidate, after a SEND_WITH_INV from B, and for a write that crosses the window's end (on
 * rxe, which checks a window's accesses against its region's bounds only: the region's end), the
 * device refuses B's write with a remote access error and not one byte of A's region changes. A type
 * 1 window is bound with {@code ibv_bind_mw}, and its rkey is refused in the same way after a bind of
 * length 0 and after its dealloc.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MemoryWindowGuestTest {
    private static final int SIZE = 16 * 1024;
    private static final long WINDOW = 4096, WINDOW_LEN = 4096;
    private static final Set<Access> REMOTE = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);

    private Context ctx;
    private ProtectionDomain pd;
    private Arena arena;
    private CompletionQueue cqA, cqB;
    private QueuePair a, b;
    private GidEntry gid;
    private MemorySegment bufA, bufB;
    private MemoryRegion mrA, mrB;
    private SendWorkRequests sends;
    private ReceiveWorkRequests recvs;
    private WorkCompletions wcs;

    @BeforeAll
    void open() {
        ctx = LoopbackPair.openTestDevice();
        pd = ctx.allocateProtectionDomain();
        arena = Arena.ofShared();
        cqA = ctx.createCompletionQueue(64);
        cqB = ctx.createCompletionQueue(64);
        Set<SendOperation> ops = EnumSet.of(
                SendOperation.SEND,
                SendOperation.RDMA_WRITE,
                SendOperation.BIND_MW,
                SendOperation.LOCAL_INV,
                SendOperation.SEND_WITH_INV);
        a = pd.createExtendedQueuePair(QueuePairInit.of(QueuePairType.RC, cqA), ops);
        b = pd.createExtendedQueuePair(QueuePairInit.of(QueuePairType.RC, cqB), ops);
        gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        GuestSupport.connect(a, b, gid, REMOTE);
        bufA = arena.allocate(SIZE, 4096);
        bufB = arena.allocate(SIZE, 4096);
        mrA = pd.register(
                arena, bufA, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.MW_BIND));
        mrB = pd.register(arena, bufB, EnumSet.of(Access.LOCAL_WRITE));
        sends = new SendWorkRequests(4, 1);
        recvs = new ReceiveWorkRequests(4, 1);
        wcs = new WorkCompletions(8);
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(wcs, recvs, sends, b, a, mrB, mrA, cqB, cqA, pd, ctx, arena);
    }

    /** Binds {@code mw} to A's window page, extended or classic, and waits for the bind's completion. */
    private int bind(MemoryWindow mw, boolean extended) {
        sends.clear()
                .bindWindow(1, mw, mrA, WINDOW, WINDOW_LEN, EnumSet.of(Access.REMOTE_WRITE))
                .signaled();
        if (extended) {
            a.postSendExtended(sends);
        } else {
            a.postSend(sends);
        }
        awaitSuccess(cqA, wcs, 1);
        assertEquals(CompletionOpcode.BIND_MW, wcs.opcode(0));
        return mw.rkey();
    }

    /** B writes {@code len} bytes of its buffer to A at {@code offset} under {@code rkey}; returns the status. */
    private int writeFromB(long offset, int len, int rkey) {
        sends.clear().write(2, mrA.address() + offset, rkey).sge(mrB, 0, len).signaled();
        b.postSendExtended(sends);
        awaitAny(cqB, wcs, 1);
        return wcs.status(0);
    }

    /** After an error completion: both queue pairs back to RTS, nothing left in the queues. */
    private void reconnect() {
        a.reset();
        b.reset();
        while (cqA.poll(wcs) > 0 || cqB.poll(wcs) > 0) {
            // flushed completions of the reset queues
        }
        GuestSupport.connect(a, b, gid, REMOTE);
    }

    private void refusedAndUntouched(long offset, int len, int rkey, String what) {
        MemorySegment before = arena.allocate(SIZE);
        before.copyFrom(bufA);
        pattern(bufB, 99);
        assertEquals(CompletionStatus.REM_ACCESS_ERR, writeFromB(offset, len, rkey), what + ": " + wcs.statusText(0));
        assertSameBytes(before, bufA, what + ": A's region");
        reconnect();
    }

    @Test
    void aWindowGrantsItsPageAndTheDeviceRefusesItsRkeyAfterInvalidation() {
        pattern(bufA, 3);
        try (MemoryWindow mw = pd.allocateWindow(MemoryWindow.Type.TYPE_2)) {
            int first = mw.rkey();
            // bound through ibv_wr_bind_mw: B writes inside the window, the bytes land, the rest stays
            int rkey = bind(mw, true);
            assertNotEquals(first, rkey, "a bind moves the key on");
            assertNotEquals(mrA.rkey(), rkey, "the window has an rkey of its own");
            MemorySegment expected = arena.allocate(SIZE);
            expected.copyFrom(bufA);
            pattern(bufB, 5);
            assertEquals(CompletionStatus.SUCCESS, writeFromB(WINDOW + 100, 512, rkey), wcs.statusText(0));
            expected.asSlice(WINDOW + 100, 512).copyFrom(bufB.asSlice(0, 512));
            assertSameBytes(expected, bufA, "A's region after the write through the window");

            // a local invalidate (ibv_wr_local_inv): the same write is refused by the device
            sends.clear().localInvalidate(3, rkey).signaled();
            a.postSendExtended(sends);
            awaitSuccess(cqA, wcs, 1);
            assertEquals(CompletionOpcode.LOCAL_INV, wcs.opcode(0));
            refusedAndUntouched(WINDOW + 100, 512, rkey, "a write under the locally invalidated rkey");

            // bound again through a classic IBV_WR_BIND_MW; B's SEND_WITH_INV revokes it
            int again = bind(mw, false);
            assertNotEquals(rkey, again);
            assertEquals(CompletionStatus.SUCCESS, writeFromB(WINDOW, 64, again), wcs.statusText(0));
            a.postRecv(recvs.clear().add(7).sge(mrA, 0, 256));
            sends.clear().sendWithInvalidate(4, again).sge(mrB, 0, 32).signaled();
            b.postSendExtended(sends);
            awaitSuccess(cqB, wcs, 1);
            awaitSuccess(cqA, wcs, 1);
            assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
            System.out.printf(
                    "SEND_WITH_INV receive: wc_flags 0x%x, invalidated rkey field 0x%x (window rkey 0x%x)%n",
                    wcs.flags(0), Integer.reverseBytes(wcs.immediate(0)), again);
            refusedAndUntouched(WINDOW, 64, again, "a write under the rkey a SEND_WITH_INV invalidated");

            // bound once more: a write that crosses the window's end. rxe checks an access through a
            // window against the window's region, not the window (check_rkey: mr_check_range(mw->mr,
            // ...)), so there only a write across the region's end is refused; other devices refuse both
            int third = bind(mw, true);
            if (ctx.deviceName().startsWith("rxe")) {
                int st = writeFromB(WINDOW + WINDOW_LEN - 8, 16, third);
                System.out.println(ctx.deviceName() + ": a write across the window's end (inside the region): "
                        + wcs.statusText(0) + " (rxe checks the region's bounds, not the window's)");
                if (st != CompletionStatus.SUCCESS) {
                    reconnect();
                }
                refusedAndUntouched(SIZE - 8, 16, third, "a write through the window across the region's end");
            } else {
                refusedAndUntouched(WINDOW + WINDOW_LEN - 8, 16, third, "a write across the window's end");
            }
            // and the region's own rkey was never affected
            assertEquals(CompletionStatus.SUCCESS, writeFromB(0, 16, mrA.rkey()), wcs.statusText(0));
        }
    }

    /** Binds the type 1 {@code mw} to A's window page with {@code ibv_bind_mw} and waits for the bind's completion. */
    private int bindType1(MemoryWindow mw, long wrId) {
        int rkey = mw.bind(a, wrId, mrA, WINDOW, WINDOW_LEN, EnumSet.of(Access.REMOTE_WRITE), true);
        awaitSuccess(cqA, wcs, 1);
        assertEquals(CompletionOpcode.BIND_MW, wcs.opcode(0));
        assertEquals(wrId, wcs.wrId(0));
        return rkey;
    }

    @Test
    void aType1WindowIsBoundWithBindMwAndTheDeviceRefusesItsRkeyAfterUnbindAndDealloc() {
        pattern(bufA, 4);
        MemoryWindow mw = pd.allocateWindow(MemoryWindow.Type.TYPE_1);
        try {
            assertEquals(MemoryWindow.Type.TYPE_1, mw.type());
            int first = mw.rkey();
            int rkey = bindType1(mw, 11);
            assertNotEquals(first, rkey, "a bind moves the key on");
            assertNotEquals(mrA.rkey(), rkey, "the window has an rkey of its own");
            MemorySegment expected = arena.allocate(SIZE);
            expected.copyFrom(bufA);
            pattern(bufB, 6);
            assertEquals(CompletionStatus.SUCCESS, writeFromB(WINDOW + 200, 256, rkey), wcs.statusText(0));
            expected.asSlice(WINDOW + 200, 256).copyFrom(bufB.asSlice(0, 256));
            assertSameBytes(expected, bufA, "A's region after the write through the type 1 window");

            // a bind of length 0: the window grants nothing, the device refuses the old rkey
            int unbound = mw.unbind(a, 12, true);
            awaitSuccess(cqA, wcs, 1);
            assertEquals(CompletionOpcode.BIND_MW, wcs.opcode(0));
            assertNotEquals(rkey, unbound);
            refusedAndUntouched(WINDOW + 200, 256, rkey, "a write under the rkey of an unbound type 1 window");

            // bound again, then deallocated: its last rkey is refused too
            int again = bindType1(mw, 13);
            assertEquals(CompletionStatus.SUCCESS, writeFromB(WINDOW, 64, again), wcs.statusText(0));
            mw.close();
            refusedAndUntouched(WINDOW, 64, again, "a write under the rkey of a deallocated type 1 window");
            assertEquals(CompletionStatus.SUCCESS, writeFromB(0, 16, mrA.rkey()), wcs.statusText(0));
        } finally {
            if (mw.isOpen()) {
                mw.close();
            }
        }
    }
}
