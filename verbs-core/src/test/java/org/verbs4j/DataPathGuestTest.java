package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.GuestSupport.assertAll;
import static org.verbs4j.GuestSupport.assertSameBytes;
import static org.verbs4j.GuestSupport.awaitSuccess;
import static org.verbs4j.GuestSupport.pattern;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier: every opcode end to end on rxe0 through one RC loopback pair (A posts, B is the
 * peer), the data checked byte for byte; SGE lists, inline data, a 32-request chain, unsignaled
 * requests with a fence; then UD through an address handle, an SRQ shared by two queue pairs,
 * and event-driven receive through a completion channel, on the same context and PD.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DataPathGuestTest {
    private static final int SIZE = 64 * 1024;
    private static final Set<Access> ALL =
            EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);

    private LoopbackPair pair;
    private Arena arena;
    private MemorySegment aBuf;
    private MemorySegment bBuf;
    private MemoryRegion aMr;
    private MemoryRegion bMr;
    private SendWorkRequests sends;
    private ReceiveWorkRequests recvs;
    private WorkCompletions wcs;

    @BeforeAll
    void open() {
        pair = LoopbackPair.open(
                QueuePairType.RC,
                EnumSet.of(Access.REMOTE_READ, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC),
                init -> init.maxSendSge(4).maxRecvSge(4).maxInlineData(64));
        arena = Arena.ofShared();
        aBuf = arena.allocate(SIZE, 4096);
        bBuf = arena.allocate(SIZE, 4096);
        aMr = pair.pd.register(arena, aBuf, ALL);
        bMr = pair.pd.register(arena, bBuf, ALL);
        sends = new SendWorkRequests(32, 4);
        recvs = new ReceiveWorkRequests(8, 4);
        wcs = new WorkCompletions(64);
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(wcs, recvs, sends, bMr, aMr, pair, arena);
    }

    @BeforeEach
    void clean() {
        aBuf.fill((byte) 0);
        bBuf.fill((byte) 0);
        sends.clear();
        recvs.clear();
    }

    @AfterEach
    void nothingLeftOver() {
        assertEquals(0, pair.cqA.poll(wcs), "no stray completion on A");
        assertEquals(0, pair.cqB.poll(wcs), "no stray completion on B");
    }

    private long remote(long offset) {
        return bMr.address() + offset;
    }

    // ---- two-sided ------------------------------------------------------------------------

    @Test
    void sendAndReceive() {
        pattern(aBuf.asSlice(0, 200), 1);
        pair.b.postRecv(recvs.add(41).sge(bMr, 0, 256));
        pair.a.postSend(sends.send(42).sge(aMr, 0, 200).signaled());

        awaitSuccess(pair.cqB, wcs, 1);
        assertEquals(41, wcs.wrId(0));
        assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
        assertEquals(200, wcs.byteLength(0));
        assertEquals(pair.b.qpNumber(), wcs.qpNumber(0));
        assertFalse(wcs.hasImmediate(0));
        assertSameBytes(aBuf.asSlice(0, 200), bBuf.asSlice(0, 200), "SEND payload");
        assertAll(bBuf.asSlice(200, 56), (byte) 0, "after the payload");

        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(42, wcs.wrId(0));
        assertEquals(CompletionOpcode.SEND, wcs.opcode(0));
        assertEquals(pair.a.qpNumber(), wcs.qpNumber(0));
        assertEquals("success", wcs.statusText(0));
    }

    @Test
    void sendWithImmediate() {
        pattern(aBuf.asSlice(0, 100), 2);
        pair.b.postRecv(recvs.add(51).sge(bMr, 0, 128));
        pair.a.postSend(sends.sendWithImmediate(52, 0xCAFEBABE).sge(aMr, 0, 100).signaled());

        awaitSuccess(pair.cqB, wcs, 1);
        assertEquals(51, wcs.wrId(0));
        assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
        assertTrue(wcs.hasImmediate(0), "flags " + wcs.flags(0));
        assertEquals(0xCAFEBABE, wcs.immediate(0));
        assertEquals(100, wcs.byteLength(0));
        assertSameBytes(aBuf.asSlice(0, 100), bBuf.asSlice(0, 100), "SEND_WITH_IMM payload");
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(52, wcs.wrId(0));
        assertEquals(CompletionOpcode.SEND, wcs.opcode(0));
    }

    @Test
    void gatherThreeSgesScatterIntoTwo() {
        pattern(aBuf.asSlice(0, 4096), 3);
        pair.b.postRecv(recvs.add(61).sge(bMr, 1000, 120).sge(bMr, 3000, 200));
        pair.a.postSend(sends.send(62)
                .sge(aMr, 0, 100)
                .sge(aMr, 500, 50)
                .sge(aMr, 2000, 150)
                .signaled());

        awaitSuccess(pair.cqB, wcs, 1);
        assertEquals(300, wcs.byteLength(0));
        MemorySegment sent = Arena.ofAuto().allocate(300);
        MemorySegment.copy(aBuf, 0, sent, 0, 100);
        MemorySegment.copy(aBuf, 500, sent, 100, 50);
        MemorySegment.copy(aBuf, 2000, sent, 150, 150);
        assertSameBytes(sent.asSlice(0, 120), bBuf.asSlice(1000, 120), "first receive SGE");
        assertSameBytes(sent.asSlice(120, 180), bBuf.asSlice(3000, 180), "second receive SGE");
        assertAll(bBuf.asSlice(3180, 20), (byte) 0, "the unused tail of the second receive SGE");
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(62, wcs.wrId(0));
    }

    @Test
    void inlineSendFromUnregisteredMemory() {
        assertTrue(pair.a.maxInlineData() >= 64, "granted inline " + pair.a.maxInlineData());
        pair.b.postRecv(recvs.add(71).sge(bMr, 0, 128));
        MemorySegment expected = arena.allocate(64);
        pattern(expected, 7);
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment unregistered = scratch.allocate(64);
            MemorySegment.copy(expected, 0, unregistered, 0, 64);
            pair.a.postSend(sends.send(72).inline(unregistered).signaled());
            // inline data is copied at post time: the buffer may change, and go, at once
            unregistered.fill((byte) 0xEE);
        }
        awaitSuccess(pair.cqB, wcs, 1);
        assertEquals(71, wcs.wrId(0));
        assertEquals(64, wcs.byteLength(0));
        assertSameBytes(expected, bBuf.asSlice(0, 64), "inline payload");
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(72, wcs.wrId(0));

        // and inline RDMA WRITE
        MemorySegment small = arena.allocate(48);
        pattern(small, 8);
        pair.a.postSend(
                sends.clear().write(73, remote(1024), bMr.rkey()).inline(small).signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        assertSameBytes(small, bBuf.asSlice(1024, 48), "inline RDMA WRITE");
    }

    @Test
    void aPrebuiltInlineWriteRepostedWithANewPayload() {
        // perftest's write_lat: one request built once, its inline byte rewritten before each post
        pair.a.postSend(sends.clear()
                .write(74, remote(2048), bMr.rkey())
                .inline(MemorySegment.ofArray(new byte[] {0, 0}))
                .signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        MemorySegment payload = sends.inlineData(0);
        for (int i = 1; i <= 3; i++) {
            payload.set(JAVA_BYTE, 1, (byte) (10 * i));
            pair.a.postSend(sends);
            awaitSuccess(pair.cqA, wcs, 1);
            assertEquals(74, wcs.wrId(0), "the same request, posted again");
            assertEquals((byte) (10 * i), bBuf.get(JAVA_BYTE, 2049), "post " + i + " sent the byte written before it");
        }
    }

    // ---- one-sided ------------------------------------------------------------------------

    /**
     * A completion queue confined to one thread, on rxe: the thread that created it posts and
     * polls through it (chains of 3, then 1, then 2 signaled writes from one chain object, so the
     * end of the list moves both ways: each post lands exactly its own requests); another thread's
     * poll is refused while the owner runs, and after the owner ended any thread may close it.
     */
    @Test
    void aConfinedCompletionQueueWorksOnItsThreadAndRefusesOthers() throws Exception {
        java.util.concurrent.CountDownLatch polledElsewhere = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch ownerMayEnd = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<CompletionQueue> made =
                new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicReference<Throwable> failed =
                new java.util.concurrent.atomic.AtomicReference<>();
        Thread owner = Thread.ofPlatform().name("cq-owner").start(() -> {
            try (SendWorkRequests w = new SendWorkRequests(4, 1);
                    WorkCompletions got = new WorkCompletions(8)) {
                CompletionQueue cq = pair.context.createConfinedCompletionQueue(512);
                made.set(cq);
                assertTrue(cq.isConfined());
                try (QueuePair x = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq));
                        QueuePair y = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq))) {
                    GuestSupport.connect(x, y, pair.gid, EnumSet.of(Access.REMOTE_WRITE), pair.options);
                    pattern(aBuf.asSlice(0, 4096), 9);
                    int[] lengths = {3, 1, 2};
                    long id = 500;
                    for (int round = 0; round < lengths.length; round++) {
                        bBuf.fill((byte) 0);
                        w.clear();
                        for (int k = 0; k < lengths[round]; k++) {
                            w.write(id + k, remote(1024L * k), bMr.rkey())
                                    .sge(aMr, 1024L * k, 1000)
                                    .signaled();
                        }
                        x.postSend(w);
                        awaitSuccess(cq, got, lengths[round]);
                        for (int k = 0; k < lengths[round]; k++) {
                            assertEquals(id + k, got.wrId(k));
                            assertSameBytes(
                                    aBuf.asSlice(1024L * k, 1000),
                                    bBuf.asSlice(1024L * k, 1000),
                                    "round " + round + " #" + k);
                        }
                        assertAll(
                                bBuf.asSlice(1024L * lengths[round], 4096),
                                (byte) 0,
                                "round " + round + ": no request beyond the chain's count was posted");
                        assertEquals(0, cq.poll(got), "round " + round + ": no stray completion");
                        id += lengths[round];
                    }
                    polledElsewhere.countDown();
                    ownerMayEnd.await();
                }
            } catch (Throwable t) {
                failed.set(t);
                polledElsewhere.countDown();
            }
        });
        polledElsewhere.await();
        CompletionQueue cq = made.get();
        if (failed.get() == null) {
            try (WorkCompletions other = new WorkCompletions(4)) {
                ResourceBusyException e = assertThrows(ResourceBusyException.class, () -> cq.poll(other));
                assertTrue(e.getMessage().contains("confined to thread \"cq-owner\""), e.getMessage());
                assertThrows(ResourceBusyException.class, cq::close, "the owner is still running");
            }
        }
        ownerMayEnd.countDown();
        owner.join(30_000);
        assertFalse(owner.isAlive());
        if (failed.get() != null) {
            throw new AssertionError("on the owner thread", failed.get());
        }
        cq.close(); // the owner has ended
        assertFalse(cq.isOpen());
    }

    @Test
    void rdmaWrite() {
        pattern(aBuf.asSlice(0, 1000), 4);
        pair.a.postSend(
                sends.write(81, remote(128), bMr.rkey()).sge(aMr, 0, 1000).signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(81, wcs.wrId(0));
        assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(0));
        assertSameBytes(aBuf.asSlice(0, 1000), bBuf.asSlice(128, 1000), "RDMA WRITE");
        assertAll(bBuf.asSlice(0, 128), (byte) 0, "before the target");
        assertAll(bBuf.asSlice(1128, 1000), (byte) 0, "after the target");
    }

    @Test
    void rdmaWriteWithImmediateConsumesAReceive() {
        pattern(aBuf.asSlice(0, 3000), 5);
        pair.b.postRecv(recvs.add(91).sge(bMr, 60000, 16));
        pair.a.postSend(sends.writeWithImmediate(92, remote(4096), bMr.rkey(), 0x01020304)
                .sge(aMr, 0, 3000)
                .signaled());
        awaitSuccess(pair.cqB, wcs, 1);
        assertEquals(91, wcs.wrId(0));
        assertEquals(CompletionOpcode.RECV_RDMA_WITH_IMM, wcs.opcode(0));
        assertTrue(wcs.hasImmediate(0));
        assertEquals(0x01020304, wcs.immediate(0));
        assertEquals(3000, wcs.byteLength(0));
        assertSameBytes(aBuf.asSlice(0, 3000), bBuf.asSlice(4096, 3000), "RDMA WRITE WITH IMM");
        assertAll(bBuf.asSlice(60000, 16), (byte) 0, "the receive buffer is not written");
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(92, wcs.wrId(0));
        assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(0));
    }

    @Test
    void rdmaRead() {
        pattern(bBuf.asSlice(8192, 777), 6);
        pair.a.postSend(
                sends.read(101, remote(8192), bMr.rkey()).sge(aMr, 16, 777).signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(101, wcs.wrId(0));
        assertEquals(CompletionOpcode.RDMA_READ, wcs.opcode(0));
        assertEquals(777, wcs.byteLength(0));
        assertSameBytes(bBuf.asSlice(8192, 777), aBuf.asSlice(16, 777), "RDMA READ");
        assertAll(aBuf.asSlice(0, 16), (byte) 0, "before the read target");
        assertAll(aBuf.asSlice(793, 100), (byte) 0, "after the read target");
    }

    @Test
    void atomics() {
        bBuf.set(JAVA_LONG, 512, 100L);
        bBuf.set(JAVA_LONG, 520, 0x7777L);
        aBuf.fill((byte) 0x55);
        pair.a.postSend(sends.compareAndSwap(111, remote(512), bMr.rkey(), 100L, 200L)
                .sge(aMr, 0, 8)
                .signaled()
                .compareAndSwap(112, remote(512), bMr.rkey(), 999L, 5L)
                .sge(aMr, 8, 8)
                .signaled()
                .fetchAndAdd(113, remote(512), bMr.rkey(), 42L)
                .sge(aMr, 16, 8)
                .signaled()
                .fetchAndAdd(114, remote(520), bMr.rkey(), -0x777L)
                .sge(aMr, 24, 8)
                .signaled());
        awaitSuccess(pair.cqA, wcs, 4);
        int[] opcodes = {
            CompletionOpcode.COMP_SWAP,
            CompletionOpcode.COMP_SWAP,
            CompletionOpcode.FETCH_ADD,
            CompletionOpcode.FETCH_ADD
        };
        for (int i = 0; i < 4; i++) {
            assertEquals(111 + i, wcs.wrId(i));
            assertEquals(opcodes[i], wcs.opcode(i));
        }
        assertEquals(100L, aBuf.get(JAVA_LONG, 0), "CAS returns the old value");
        assertEquals(200L, aBuf.get(JAVA_LONG, 8), "a failed CAS returns the current value");
        assertEquals(200L, aBuf.get(JAVA_LONG, 16), "FAA returns the old value");
        assertEquals(0x7777L, aBuf.get(JAVA_LONG, 24));
        assertEquals(242L, bBuf.get(JAVA_LONG, 512), "swapped to 200 (the failed compare left it), then +42");
        assertEquals(0x7000L, bBuf.get(JAVA_LONG, 520));
        assertAll(aBuf.asSlice(32, 32), (byte) 0x55, "beyond the four results");
    }

    @Test
    void aFailedCompareLeavesRemoteUnchanged() {
        bBuf.set(JAVA_LONG, 0, 0x1122334455667788L);
        pair.a.postSend(sends.compareAndSwap(121, remote(0), bMr.rkey(), 0x1122334455667789L, 1L)
                .sge(aMr, 0, 8)
                .signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(0x1122334455667788L, aBuf.get(JAVA_LONG, 0));
        assertEquals(0x1122334455667788L, bBuf.get(JAVA_LONG, 0));
    }

    @Test
    void chainOf32WritesInOnePostOnlyTheLastSignaled() {
        pattern(aBuf.asSlice(0, 32 * 64), 9);
        for (int i = 0; i < 32; i++) {
            // destinations interleaved with gaps: slice i goes to 100 + i * 128
            sends.write(200 + i, remote(100 + i * 128L), bMr.rkey()).sge(aMr, i * 64L, 64);
        }
        sends.signaled();
        assertEquals(32, sends.size());
        pair.a.postSend(sends);
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(231, wcs.wrId(0));
        assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(0));
        for (int i = 0; i < 32; i++) {
            assertSameBytes(aBuf.asSlice(i * 64L, 64), bBuf.asSlice(100 + i * 128L, 64), "slice " + i);
            assertAll(bBuf.asSlice(164 + i * 128L, 64), (byte) 0, "gap after slice " + i);
        }
        assertEquals(0, pair.cqA.poll(wcs, 1, Duration.ofMillis(200)), "the 31 unsignaled writes complete silently");
    }

    @Test
    void bulkWritesOf32StridedSlicesInOnePost() {
        pattern(aBuf.asSlice(0, 32 * 64), 11);
        // one call: request k sends aBuf[k * 64, + 64) to bBuf[100 + k * 128, + 64), wr_id 400 + k
        sends.writes(32, 400, remote(100), 128, bMr.rkey(), aMr, 0, 64, 64).signaled();
        assertEquals(32, sends.size());
        pair.a.postSend(sends);
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(431, wcs.wrId(0), "the last request is the signaled one");
        assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(0));
        assertEquals(64, wcs.byteLength(0));
        assertAll(bBuf.asSlice(0, 100), (byte) 0, "before the first slice");
        for (int k = 0; k < 32; k++) {
            assertSameBytes(aBuf.asSlice(k * 64L, 64), bBuf.asSlice(100 + k * 128L, 64), "slice " + k);
            assertAll(bBuf.asSlice(164 + k * 128L, 64), (byte) 0, "gap after slice " + k);
        }
        assertEquals(0, pair.cqA.poll(wcs, 1, Duration.ofMillis(200)), "the 31 unsignaled writes complete silently");
    }

    @Test
    void unsignaledReadThenFencedWrite() {
        pattern(bBuf.asSlice(0, 512), 10);
        // the READ brings bBuf[0,512) into aBuf[0,512) (unsignaled); the fenced WRITE sends aBuf[0,512)
        // to bBuf[2048,2560) only after the READ finished, so it carries the read data
        pair.a.postSend(sends.read(301, remote(0), bMr.rkey())
                .sge(aMr, 0, 512)
                .write(302, remote(2048), bMr.rkey())
                .sge(aMr, 0, 512)
                .fence()
                .signaled());
        awaitSuccess(pair.cqA, wcs, 1);
        assertEquals(302, wcs.wrId(0), "only the signaled request completes");
        assertEquals(CompletionOpcode.RDMA_WRITE, wcs.opcode(0));
        assertSameBytes(bBuf.asSlice(0, 512), aBuf.asSlice(0, 512), "the unsignaled READ");
        assertSameBytes(bBuf.asSlice(0, 512), bBuf.asSlice(2048, 512), "the fenced WRITE carried the READ's data");
        assertEquals(0, pair.cqA.poll(wcs, 1, Duration.ofMillis(200)), "no completion for the unsignaled READ");
    }

    // ---- UD, SRQ, completion channel on the same context and PD ---------------------------

    @Test
    void udSendThroughAnAddressHandle() {
        final int qkey = 0x1234;
        final int grh = 40;
        final int len = 512;
        CompletionQueue cqS = null, cqR = null;
        QueuePair s = null, r = null;
        AddressHandle ah = null;
        try {
            cqS = pair.context.createCompletionQueue(16);
            cqR = pair.context.createCompletionQueue(16);
            s = pair.pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.UD, cqS).maxSendWr(8).maxRecvWr(8));
            r = pair.pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.UD, cqR).maxSendWr(8).maxRecvWr(8));
            s.activateUd(1, qkey, 0);
            r.activateUd(1, qkey, 0);
            assertEquals(QueuePairState.RTS, r.query().state());
            assertEquals(qkey, r.query().qkey());
            AddressVector av = AddressVector.global(1, pair.gid.gid(), pair.gid.index());
            ah = pair.pd.createAddressHandle(av);
            assertEquals(av, ah.vector());

            pattern(aBuf.asSlice(0, len), 11);
            r.postRecv(recvs.add(401).sge(bMr, 0, grh + 1024));
            s.postSend(sends.send(402)
                    .sge(aMr, 0, len)
                    .destination(ah, r.qpNumber(), qkey)
                    .signaled());

            awaitSuccess(cqR, wcs, 1);
            assertEquals(401, wcs.wrId(0));
            assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
            assertEquals(grh + len, wcs.byteLength(0), "the GRH precedes the payload");
            assertEquals(s.qpNumber(), wcs.sourceQp(0));
            assertEquals(r.qpNumber(), wcs.qpNumber(0));
            assertTrue((wcs.flags(0) & WorkCompletions.WC_GRH) != 0, "flags " + wcs.flags(0));
            assertSameBytes(aBuf.asSlice(0, len), bBuf.asSlice(grh, len), "UD payload");
            awaitSuccess(cqS, wcs, 1);
            assertEquals(402, wcs.wrId(0));
            assertEquals(CompletionOpcode.SEND, wcs.opcode(0));
        } finally {
            GuestSupport.closeAll(ah, r, s, cqR, cqS);
        }
    }

    @Test
    void sharedReceiveQueueServesTwoQueuePairs() {
        CompletionQueue cqS = null, cqR = null;
        SharedReceiveQueue srq = null;
        QueuePair a1 = null, a2 = null, b1 = null, b2 = null;
        try {
            cqS = pair.context.createCompletionQueue(16);
            cqR = pair.context.createCompletionQueue(16);
            srq = pair.pd.createSharedReceiveQueue(16, 1);
            assertTrue(srq.maxWr() >= 16);
            b1 = pair.pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.RC, cqS, cqR).sharedReceiveQueue(srq));
            b2 = pair.pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.RC, cqS, cqR).sharedReceiveQueue(srq));
            a1 = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS));
            a2 = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS));
            GuestSupport.connect(a1, b1, pair.gid, Set.of());
            GuestSupport.connect(a2, b2, pair.gid, Set.of());

            for (int i = 0; i < 4; i++) {
                recvs.add(500 + i).sge(bMr, 1024L * i, 1024);
            }
            srq.postRecv(recvs);
            QueuePair direct = b1;
            VerbsException e = assertThrows(VerbsException.class, () -> direct.postRecv(recvs));
            assertEquals(Errno.EINVAL, e.errno());
            assertTrue(e.getMessage().contains("post receives to the SharedReceiveQueue"), e.getMessage());

            aBuf.asSlice(0, 300).fill((byte) 0x11);
            aBuf.asSlice(300, 200).fill((byte) 0x22);
            a1.postSend(sends.send(601).sge(aMr, 0, 300).signaled());
            a2.postSend(sends.clear().send(602).sge(aMr, 300, 200).signaled());

            awaitSuccess(cqR, wcs, 2);
            boolean saw1 = false, saw2 = false;
            for (int i = 0; i < 2; i++) {
                long slot = wcs.wrId(i) - 500;
                assertTrue(slot >= 0 && slot < 4, "wr_id " + wcs.wrId(i));
                MemorySegment got = bBuf.asSlice(1024 * slot, wcs.byteLength(i));
                if (wcs.qpNumber(i) == b1.qpNumber()) {
                    saw1 = true;
                    assertEquals(300, wcs.byteLength(i));
                    assertAll(got, (byte) 0x11, "what a1 sent, received on b1");
                } else {
                    assertEquals(b2.qpNumber(), wcs.qpNumber(i), "the completion names b1 or b2");
                    saw2 = true;
                    assertEquals(200, wcs.byteLength(i));
                    assertAll(got, (byte) 0x22, "what a2 sent, received on b2");
                }
            }
            assertTrue(saw1 && saw2, "one receive per queue pair");
            assertNotEquals(wcs.wrId(0), wcs.wrId(1));
            awaitSuccess(cqS, wcs, 2);
        } finally {
            GuestSupport.closeAll(b2, b1, a2, a1, srq, cqR, cqS);
        }
    }

    @Test
    void eventDrivenReceiveThroughACompletionChannel() {
        CompletionChannel channel = null;
        CompletionQueue cqE = null, cqS = null;
        QueuePair s = null, r = null;
        try {
            channel = pair.context.createCompletionChannel();
            assertTrue(channel.fd() >= 0);
            cqE = pair.context.createCompletionQueue(16, channel, 0);
            cqS = pair.context.createCompletionQueue(16);
            assertSame(channel, cqE.channel());
            r = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS, cqE));
            s = pair.pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqS));
            GuestSupport.connect(s, r, pair.gid, Set.of());
            r.postRecv(recvs.add(701).sge(bMr, 0, 256));
            cqE.requestNotify(false);

            long t0 = System.nanoTime();
            assertNull(channel.awaitEvent(Duration.ofMillis(300)), "no traffic, no event");
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 250 && ms < 10_000, "awaitEvent returned after " + ms + " ms");

            pattern(aBuf.asSlice(0, 64), 12);
            s.postSend(sends.send(702).sge(aMr, 0, 64).signaled());
            assertSame(cqE, channel.awaitEvent(Duration.ofSeconds(10)), "the armed CQ raised the event");
            cqE.requestNotify(false);
            awaitSuccess(cqE, wcs, 1);
            assertEquals(701, wcs.wrId(0));
            assertEquals(CompletionOpcode.RECV, wcs.opcode(0));
            assertSameBytes(aBuf.asSlice(0, 64), bBuf.asSlice(0, 64), "received after the event");
            awaitSuccess(cqS, wcs, 1);
            assertEquals(702, wcs.wrId(0));

            VerbsException e = assertThrows(VerbsException.class, () -> pair.cqA.requestNotify(false));
            assertEquals(Errno.EINVAL, e.errno());
            CompletionChannel busy = channel;
            assertEquals(
                    Errno.EBUSY,
                    assertThrows(VerbsException.class, busy::close).errno(),
                    "a channel refuses to close while a CQ reports to it");
        } finally {
            GuestSupport.closeAll(s, r, cqS, cqE, channel);
        }
        // channel and CQs released cleanly even with an event acknowledged only at close
        assertFalse(channel.isOpen());
    }
}
