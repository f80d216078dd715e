package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.generated.ibverbs.ibv_recv_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_send_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_sge;

/**
 * The native descriptors of {@link SendWorkRequests} and {@link ReceiveWorkRequests}, read back
 * through {@link WorkRequestChain#segment()} with the jextract-generated struct accessors (not the
 * offsets the chain writes with): pre-linked {@code next} and {@code sg_list}, termination and
 * relinking around a post, {@code indexOf}, capacity and SGE bookkeeping, {@code clear()}, and the
 * copy of inline data into the chain's staging memory. Runs on the stand-in bed of the misuse
 * catalogue (a region with lkey 0x1111 and an RC queue pair in RTS).
 */
class WorkRequestChainTest extends MisuseCatalogueTest.Bed {

    private static MemorySegment sendWr(SendWorkRequests wrs, int i) {
        return ibv_send_wr.asSlice(wrs.segment(), i);
    }

    /** SGE {@code s} of a request, found through the request's {@code sg_list} pointer. */
    private static MemorySegment sge(MemorySegment sgList, int s) {
        return ibv_sge.asSlice(sgList.reinterpret(ibv_sge.sizeof() * (s + 1)), s);
    }

    @Test
    void nextAndSgListArePreLinkedOverTheWholeCapacity() {
        try (SendWorkRequests wrs = new SendWorkRequests(5, 3);
                ReceiveWorkRequests rwrs = new ReceiveWorkRequests(4, 2)) {
            MemorySegment seg = wrs.segment();
            assertEquals(ibv_send_wr.sizeof() * 5, seg.byteSize(), "the view covers the capacity");
            assertEquals(0, seg.address() % 64, "descriptors are cache-line aligned");
            long sg0 = ibv_send_wr.sg_list(sendWr(wrs, 0)).address();
            for (int i = 0; i < 5; i++) {
                MemorySegment wr = sendWr(wrs, i);
                long next = ibv_send_wr.next(wr).address();
                assertEquals(i < 4 ? seg.address() + ibv_send_wr.sizeof() * (i + 1) : 0L, next, "next of #" + i);
                assertEquals(
                        sg0 + ibv_sge.sizeof() * 3 * i,
                        ibv_send_wr.sg_list(wr).address(),
                        "sg_list of #" + i + ": maxSge SGEs per request");
            }
            assertEquals(0, sg0 % 64);

            MemorySegment rseg = rwrs.segment();
            assertEquals(ibv_recv_wr.sizeof() * 4, rseg.byteSize());
            long rsg0 = ibv_recv_wr.sg_list(ibv_recv_wr.asSlice(rseg, 0)).address();
            for (int i = 0; i < 4; i++) {
                MemorySegment wr = ibv_recv_wr.asSlice(rseg, i);
                assertEquals(
                        i < 3 ? rseg.address() + ibv_recv_wr.sizeof() * (i + 1) : 0L,
                        ibv_recv_wr.next(wr).address());
                assertEquals(
                        rsg0 + ibv_sge.sizeof() * 2 * i, ibv_recv_wr.sg_list(wr).address());
            }
        }
    }

    @Test
    void endAtEndsTheListAfterNRequestsAndMovesTheEndWhenTheCountChanges() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            long base = wrs.segment().address();
            long size = ibv_send_wr.sizeof();
            wrs.endAt(2);
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 1)).address(), "#1 ends the list for the post");
            assertEquals(base + size, ibv_send_wr.next(sendWr(wrs, 0)).address(), "#0 untouched");
            assertEquals(base + 3 * size, ibv_send_wr.next(sendWr(wrs, 2)).address(), "#2 untouched");
            wrs.endAt(2);
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 1)).address(), "the same count: the end stays");
            wrs.endAt(4);
            assertEquals(base + 2 * size, ibv_send_wr.next(sendWr(wrs, 1)).address(), "the old end linked again");
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 3)).address(), "the last request always ends the list");
            wrs.endAt(1);
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 0)).address());
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 3)).address(), "the last slot is never linked");
            wrs.endAt(3);
            assertEquals(base + size, ibv_send_wr.next(sendWr(wrs, 0)).address());
            assertEquals(base + 2 * size, ibv_send_wr.next(sendWr(wrs, 1)).address());
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 2)).address());
        }
    }

    @Test
    void aPostHandsTheProviderExactlyCountRequestsAndLeavesTheChainLinked() {
        try (SendWorkRequests wrs = new SendWorkRequests(8, 1)) {
            for (int i = 0; i < 3; i++) {
                wrs.write(100 + i, 0x1000L * i, 7).sge(mr, 64L * i, 64);
            }
            qp.postSend(wrs);
            assertEquals(wrs.segment().address(), p.lastWr());
            assertEquals(3, p.wqeCount(), "the provider's walk of next stopped after the third request");
            for (int i = 0; i < 7; i++) {
                assertEquals(
                        i == 2 ? 0L : wrs.segment().address() + ibv_send_wr.sizeof() * (i + 1),
                        ibv_send_wr.next(sendWr(wrs, i)).address(),
                        "after the post: #" + i + " (the end stays at #2)");
            }
            // a failed post reports the request the provider refused
            p.failPostAt(1, Errno.ENOMEM);
            VerbsException e = assertThrows(VerbsException.class, () -> qp.postSend(wrs));
            assertEquals(Errno.ENOMEM, e.errno());
            assertTrue(e.getMessage().contains("#1"), e.getMessage());
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 2)).address());
            // a longer chain: the end moves to its last request, and the provider walks all of them
            p.failPostAt(-1, 0);
            long before = p.wqeCount();
            wrs.write(103, 0x3000L, 7).sge(mr, 192, 64);
            qp.postSend(wrs);
            assertEquals(before + 4, p.wqeCount(), "the fourth request was reached through #2's restored link");
            assertEquals(
                    wrs.segment().address() + ibv_send_wr.sizeof() * 3,
                    ibv_send_wr.next(sendWr(wrs, 2)).address());
            assertEquals(0L, ibv_send_wr.next(sendWr(wrs, 3)).address());
            // a shorter one: the provider stops at its last request though later slots hold requests
            wrs.clear().write(104, 0x4000L, 7).sge(mr, 0, 64);
            before = p.wqeCount();
            qp.postSend(wrs);
            assertEquals(before + 1, p.wqeCount(), "the provider saw exactly the one request of the chain");
        } finally {
            p.failPostAt(-1, 0);
        }
    }

    @Test
    void indexOfMapsTheAddressOfAnAddedRequestAndNothingElse() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            long base = wrs.segment().address();
            long size = ibv_send_wr.sizeof();
            assertEquals(-1, wrs.indexOf(base), "no request yet");
            wrs.send(1).send(2).send(3);
            assertEquals(0, wrs.indexOf(base));
            assertEquals(2, wrs.indexOf(base + 2 * size));
            assertEquals(-1, wrs.indexOf(base + 3 * size), "within the capacity but not added");
            assertEquals(-1, wrs.indexOf(base + size + 8), "inside a request");
            assertEquals(-1, wrs.indexOf(base - size));
            assertEquals(-1, wrs.indexOf(0L));
        }
    }

    @Test
    void requestsAndSgesAreWrittenWhereTheProviderReadsThem() {
        try (SendWorkRequests wrs = new SendWorkRequests(2, 2)) {
            assertEquals(2, wrs.capacity());
            assertEquals(2, wrs.maxSgePerRequest());
            wrs.writeWithImmediate(42, 0xdead_beef_0000L, 0x77, 0x01020304)
                    .sge(mr, 16, 100)
                    .sge(mr, 512, 200)
                    .signaled();
            MemorySegment wr = sendWr(wrs, 0);
            assertEquals(42, ibv_send_wr.wr_id(wr));
            assertEquals(SendWorkRequests.OP_RDMA_WRITE_WITH_IMM, ibv_send_wr.opcode(wr));
            assertEquals(SendWorkRequests.FLAG_SIGNALED, ibv_send_wr.send_flags(wr));
            assertEquals(Integer.reverseBytes(0x01020304), ibv_send_wr.imm_data(wr), "immediate data in network order");
            MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(wr));
            assertEquals(0xdead_beef_0000L, ibv_send_wr.wr.rdma.remote_addr(rdma));
            assertEquals(0x77, ibv_send_wr.wr.rdma.rkey(rdma));
            assertEquals(2, ibv_send_wr.num_sge(wr));
            MemorySegment sgList = ibv_send_wr.sg_list(wr);
            assertEquals(mr.address() + 16, ibv_sge.addr(sge(sgList, 0)));
            assertEquals(100, ibv_sge.length(sge(sgList, 0)));
            assertEquals(0x1111, ibv_sge.lkey(sge(sgList, 0)));
            assertEquals(mr.address() + 512, ibv_sge.addr(sge(sgList, 1)));
            assertEquals(200, ibv_sge.length(sge(sgList, 1)));
            assertEquals(300, wrs.payloadAt(0));
            assertEquals(2, wrs.maxSges);

            VerbsException full = assertThrows(VerbsException.class, () -> wrs.sge(mr, 0, 1));
            assertEquals(Errno.EINVAL, full.errno(), "a third SGE does not fit");
            assertEquals(2, ibv_send_wr.num_sge(wr), "the refused SGE changed nothing");

            wrs.send(43);
            assertThrows(QueueFullException.class, () -> wrs.send(44), "the capacity is 2");
            assertEquals(2, wrs.size());
            assertEquals(0, ibv_send_wr.num_sge(sendWr(wrs, 1)), "a new request starts without SGEs");
        }
    }

    @Test
    void packPutsTwoAdjacentIntsIntoOneStoreInNativeOrder() {
        MemorySegment m = java.lang.foreign.Arena.ofAuto().allocate(16, 8);
        int[][] pairs = {{0x12345678, 0x9abcdef0}, {-1, 0}, {0, -1}, {Integer.MIN_VALUE, 7}};
        for (int[] p : pairs) {
            m.set(java.lang.foreign.ValueLayout.JAVA_LONG, 8, WorkRequestChain.pack(p[0], p[1]));
            assertEquals(p[0], m.get(java.lang.foreign.ValueLayout.JAVA_INT, 8), "the low field");
            assertEquals(p[1], m.get(java.lang.foreign.ValueLayout.JAVA_INT, 12), "the high field");
        }
    }

    @Test
    void signaledRequestsAreListedOnceEachInOrder() {
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.write(1, 0, 1)
                    .signaled()
                    .signaled()
                    .write(2, 0, 1)
                    .write(3, 0, 1)
                    .signaled();
            assertEquals(2, wrs.signaledCount, "signaled() twice on one request lists it once");
            assertEquals(0, wrs.signaledIndexes[0]);
            assertEquals(2, wrs.signaledIndexes[1]);
            assertEquals(SendWorkRequests.FLAG_SIGNALED, wrs.flagsAt(0));
            assertEquals(0, wrs.flagsAt(1));
            wrs.clear().send(4).signaled();
            assertEquals(1, wrs.signaledCount);
            assertEquals(0, wrs.signaledIndexes[0]);
        }
    }

    @Test
    void aPollOfSeveralSendCompletionsCreditsEachOneInOrder() {
        org.junit.jupiter.api.Assumptions.assumeTrue(Verbs.CHECKED, "checked mode accounts for outstanding work");
        try (SendWorkRequests wrs = new SendWorkRequests(8, 1);
                WorkCompletions two = new WorkCompletions(2);
                WorkCompletions four = new WorkCompletions(4)) {
            for (int i = 0; i < 8; i++) {
                wrs.write(i, 0x1000, 1).sge(mr, 0, 8);
                if (i % 2 == 1) {
                    wrs.signaled(); // #1, #3, #5, #7
                }
            }
            qp.postSend(wrs);
            assertEquals(8, qp.sendOutstanding());
            assertEquals(2, cq.poll(two), "the completions of #1 and #3, credited as one run");
            assertEquals(3, two.wrId(1));
            assertEquals(4, qp.sendOutstanding(), "#0..#3 are done, #4..#7 are not");
            assertEquals(2, cq.poll(four));
            assertEquals(0, qp.sendOutstanding());
            qp.postSend(wrs);
            qp.postSend(wrs);
            assertEquals(4, cq.poll(four), "two chains' completions in one poll");
            assertEquals(8, qp.sendOutstanding());
            assertEquals(4, cq.poll(four));
            assertEquals(0, qp.sendOutstanding());
        }
    }

    @Test
    void receiveRequestsAreWrittenInPlace() {
        try (ReceiveWorkRequests rwrs = new ReceiveWorkRequests(3, 1)) {
            rwrs.add(7).sge(mr, 0, 1024).add(8).sge(mr, 1024, 2048);
            assertEquals(2, rwrs.size());
            MemorySegment wr = ibv_recv_wr.asSlice(rwrs.segment(), 1);
            assertEquals(8, ibv_recv_wr.wr_id(wr));
            assertEquals(1, ibv_recv_wr.num_sge(wr));
            MemorySegment s = sge(ibv_recv_wr.sg_list(wr), 0);
            assertEquals(mr.address() + 1024, ibv_sge.addr(s));
            assertEquals(2048, ibv_sge.length(s));
            assertEquals(0x1111, ibv_sge.lkey(s));
            assertEquals(1, rwrs.indexOf(wr.address()));
            rwrs.clear();
            assertEquals(0, rwrs.size());
            assertEquals(-1, rwrs.indexOf(wr.address()));
        }
    }

    @Test
    void clearForgetsTheRequestsAndTheSummaryButKeepsTheLinks() {
        try (SendWorkRequests wrs = new SendWorkRequests(3, 2, 64)) {
            long base = wrs.segment().address();
            wrs.read(1, 0x2000, 9).sge(mr, 0, 8);
            wrs.send(2).inline(MemorySegment.ofArray(new byte[40])).inline(MemorySegment.ofArray(new byte[8]));
            assertEquals(2, wrs.size());
            assertTrue(wrs.hasNonSendOps());
            assertTrue(wrs.hasReadOrAtomicOps());
            assertEquals(48, wrs.maxInline);
            assertEquals(2, wrs.maxSges);

            wrs.clear();
            assertEquals(0, wrs.size());
            assertFalse(wrs.hasNonSendOps());
            assertFalse(wrs.hasReadOrAtomicOps());
            assertEquals(0, wrs.maxInline);
            assertEquals(0, wrs.maxSges);
            assertEquals(0, wrs.withDestination);
            assertTrue(wrs.everyRequestHasDestination(), "vacuously, for an empty chain");
            for (int i = 0; i < 2; i++) {
                assertEquals(
                        base + ibv_send_wr.sizeof() * (i + 1),
                        ibv_send_wr.next(sendWr(wrs, i)).address());
            }
            wrs.send(3);
            assertEquals(base, wrs.segment().address(), "the memory is reused");
            assertEquals(3, ibv_send_wr.wr_id(sendWr(wrs, 0)), "the first request is written to slot 0 again");
            assertEquals(0, ibv_send_wr.num_sge(sendWr(wrs, 0)));
            assertEquals(0, ibv_send_wr.send_flags(sendWr(wrs, 0)), "no stale INLINE flag");
            assertEquals(
                    0L,
                    ibv_send_wr
                            .wr
                            .ud
                            .ah(ibv_send_wr.wr.ud(ibv_send_wr.wr(sendWr(wrs, 0))))
                            .address(),
                    "a SEND starts with no stale destination");
        }
    }

    @Test
    void inlineDataIsCopiedIntoTheChain() {
        try (SendWorkRequests wrs = new SendWorkRequests(2, 2, 32)) {
            byte[] a = {1, 2, 3, 4, 5};
            byte[] b = new byte[27];
            java.util.Arrays.fill(b, (byte) 9);
            wrs.send(1).inline(MemorySegment.ofArray(a)).inline(MemorySegment.ofArray(b));
            a[0] = 99; // the caller may reuse its buffer at once
            MemorySegment wr = sendWr(wrs, 0);
            assertEquals(SendWorkRequests.FLAG_INLINE, ibv_send_wr.send_flags(wr) & SendWorkRequests.FLAG_INLINE);
            assertEquals(2, ibv_send_wr.num_sge(wr));
            MemorySegment s0 = sge(ibv_send_wr.sg_list(wr), 0);
            MemorySegment s1 = sge(ibv_send_wr.sg_list(wr), 1);
            assertEquals(5, ibv_sge.length(s0));
            assertEquals(0, ibv_sge.lkey(s0), "inline data has no key");
            assertEquals(ibv_sge.addr(s0) + 5, ibv_sge.addr(s1), "pieces of one request are staged back to back");
            assertNotEquals(mr.address(), ibv_sge.addr(s0));
            byte[] staged =
                    MemorySegment.ofAddress(ibv_sge.addr(s0)).reinterpret(32).toArray(JAVA_BYTE);
            assertArrayEquals(
                    new byte[] {1, 2, 3, 4, 5}, java.util.Arrays.copyOf(staged, 5), "a copy, made when added");
            assertArrayEquals(b, java.util.Arrays.copyOfRange(staged, 5, 32));

            assertThrows(
                    InvalidRequestException.class,
                    () -> wrs.send(2).inline(MemorySegment.ofArray(new byte[33])),
                    "more than the inline capacity of a request");
            assertEquals(0, ibv_send_wr.num_sge(sendWr(wrs, 1)), "the refused inline added no SGE");
            wrs.inline(MemorySegment.ofArray(new byte[] {7}));
            long second = ibv_sge.addr(sge(ibv_send_wr.sg_list(sendWr(wrs, 1)), 0));
            assertEquals(ibv_sge.addr(s0) + 32, second, "each request has its own staging stride");
        }
    }

    @Test
    void inlineDataIsTheStagingTheNextPostSends() {
        SendWorkRequests wrs = new SendWorkRequests(3, 2, 32);
        assertThrows(InvalidRequestException.class, () -> wrs.inlineData(0), "no request yet");
        wrs.send(1).inline(MemorySegment.ofArray(new byte[] {1, 2, 3})).inline(MemorySegment.ofArray(new byte[] {4}));
        wrs.write(2, 0x1000, 5);
        MemorySegment view = wrs.inlineData(0);
        assertEquals(32, view.byteSize(), "the request's inline stride");
        assertArrayEquals(
                new byte[] {1, 2, 3, 4}, view.asSlice(0, 4).toArray(JAVA_BYTE), "the bytes inline() copied, in order");
        view.set(JAVA_BYTE, 3, (byte) 42);
        MemorySegment sge1 = sge(ibv_send_wr.sg_list(sendWr(wrs, 0)), 1);
        assertEquals(
                42,
                MemorySegment.ofAddress(ibv_sge.addr(sge1)).reinterpret(1).get(JAVA_BYTE, 0),
                "the SGE the provider copies from at post time sees the write");
        assertThrows(InvalidRequestException.class, () -> wrs.inlineData(1), "a request without inline data");
        assertThrows(InvalidRequestException.class, () -> wrs.inlineData(2), "not a request of the chain");
        assertThrows(InvalidRequestException.class, () -> wrs.inlineData(-1), "not a request of the chain");
        assertThrows(IndexOutOfBoundsException.class, () -> view.get(JAVA_BYTE, 32), "bounded by the stride");
        wrs.close();
        view.set(JAVA_BYTE, 0, (byte) 7); // the view keeps the memory alive after close: no crash, nothing posted
        assertEquals(7, view.get(JAVA_BYTE, 0));
        assertThrows(ResourceClosedException.class, () -> wrs.inlineData(0), "a closed chain");
    }

    @Test
    void theRawViewDiesWithTheChain() {
        SendWorkRequests wrs = new SendWorkRequests(2, 1);
        MemorySegment view = wrs.segment();
        wrs.send(1);
        assertEquals(1, ibv_send_wr.wr_id(ibv_send_wr.asSlice(view, 0)));
        wrs.close();
        assertThrows(IllegalStateException.class, () -> ibv_send_wr.wr_id(ibv_send_wr.asSlice(view, 0)));
        assertThrows(ResourceClosedException.class, wrs::segment);
        assertThrows(ResourceClosedException.class, () -> wrs.send(2));
    }
}
