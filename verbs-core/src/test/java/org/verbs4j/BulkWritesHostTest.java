package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.generated.ibverbs.ibv_send_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_sge;
import org.verbs4j.testing.StandInProvider;

/**
 * {@link SendWorkRequests#writes}, the bulk append of n RDMA_WRITEs of one shape, on the stand-in
 * bed of the misuse catalogue (a 4 KiB region with lkey 0x1111, an RC queue pair in RTS): it
 * writes the same descriptors as n {@code write(..).sge(..)} (read back with jextract's struct
 * accessors and as the provider saw them), keeps the chain's summary (count, current request,
 * signaled list, remembered regions), and a refused call leaves every byte of the chain as it
 * was. Runs in checked mode and again in unchecked mode (the surefire execution
 * {@code unchecked-mode}): the bounds of the region are checked only in checked mode; the
 * capacity, the closed chain and the closed region are refused in both.
 */
class BulkWritesHostTest extends MisuseCatalogueTest.Bed {

    private static MemorySegment sendWr(SendWorkRequests wrs, int i) {
        return ibv_send_wr.asSlice(wrs.segment(), i);
    }

    private static MemorySegment firstSge(MemorySegment wr) {
        return ibv_sge.asSlice(ibv_send_wr.sg_list(wr).reinterpret(ibv_sge.sizeof()), 0);
    }

    /** The fields a one-SGE RDMA_WRITE consists of, as the provider reads them. */
    private static long[] fields(SendWorkRequests wrs, int i) {
        MemorySegment wr = sendWr(wrs, i);
        MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(wr));
        MemorySegment s = firstSge(wr);
        return new long[] {
            ibv_send_wr.wr_id(wr),
            ibv_send_wr.opcode(wr),
            ibv_send_wr.num_sge(wr),
            ibv_send_wr.send_flags(wr),
            ibv_send_wr.imm_data(wr),
            ibv_send_wr.wr.rdma.remote_addr(rdma),
            ibv_send_wr.wr.rdma.rkey(rdma),
            ibv_sge.addr(s),
            ibv_sge.length(s),
            ibv_sge.lkey(s)
        };
    }

    @Test
    void writesTheSameDescriptorsAsOneWriteAndSgePerRequest() {
        try (SendWorkRequests one = new SendWorkRequests(8, 1);
                SendWorkRequests bulk = new SendWorkRequests(8, 1)) {
            // dirty the slots first: the bulk call must overwrite flags and immediate data of a reused slot
            for (int k = 0; k < 6; k++) {
                bulk.writeWithImmediate(-1, 0, 0, 0x55).sge(mr, 0, 1).signaled().fence();
            }
            bulk.clear();
            for (int k = 0; k < 6; k++) {
                one.write(70 + k, 0x9000L + k * 256L, 0x2222).sge(mr, 32 + k * 128L, 100);
            }
            one.signaled();
            bulk.writes(6, 70, 0x9000L, 256, 0x2222, mr, 32, 128, 100).signaled();
            assertEquals(6, bulk.size());
            for (int k = 0; k < 6; k++) {
                assertArrayEquals(fields(one, k), fields(bulk, k), "request #" + k);
            }
            assertEquals(
                    mr.address() + 32 + 5 * 128, fields(bulk, 5)[7], "the SGE of #5 (a stride of 128 from offset 32)");
            assertEquals(0x9000L + 5 * 256, fields(bulk, 5)[5], "the remote address of #5");
            assertEquals(1, bulk.signaledCount, "signaled() after the bulk call flags its last request only");
            assertEquals(5, bulk.signaledIndexes[0]);
            for (int k = 0; k < 6; k++) {
                assertSame(
                        mr, bulk.sgeRegions[k], "the chain remembers the region of #" + k + " for the post-time check");
            }
            assertEquals(1, bulk.maxSges);
            assertTrue(bulk.hasNonSendOps(), "an RDMA WRITE is in the chain's opcode summary");
            assertFalse(bulk.hasReadOrAtomicOps());
        }
    }

    @Test
    void theProviderSeesEveryRequestOfABulkPostAndItsCompletionIsAccounted() {
        try (SendWorkRequests wrs = new SendWorkRequests(16, 2);
                WorkCompletions wcs = new WorkCompletions(4)) {
            long before = p.wqeCount();
            wrs.send(1)
                    .sge(mr, 0, 8)
                    .writes(10, 500, 0x4000L, 64, 0x2222, mr, 1024, 64, 64)
                    .sge(mr, 3000, 16) // a second SGE on the bulk call's last request
                    .signaled();
            assertEquals(11, wrs.size());
            qp.postSend(wrs);
            assertEquals(before + 11, p.wqeCount(), "one post handed the provider all 11 requests");
            StandInProvider.Wqe send = p.wqe(before);
            assertEquals(1, send.wrId());
            assertEquals(SendWorkRequests.OP_SEND, send.opcode());
            for (int k = 0; k < 10; k++) {
                StandInProvider.Wqe w = p.wqe(before + 1 + k);
                assertEquals(500 + k, w.wrId());
                assertEquals(SendWorkRequests.OP_RDMA_WRITE, w.opcode());
                assertEquals(0x4000L + 64L * k, w.remoteAddr());
                assertEquals(0x2222, w.rkey());
                assertEquals(mr.address() + 1024 + 64L * k, w.addr());
                assertEquals(0x1111, w.lkey());
                assertEquals(k < 9 ? 1 : 2, w.numSge(), "#" + k);
                assertEquals(k < 9 ? 64 : 80, w.totalLength());
                assertEquals(k < 9 ? 0 : SendWorkRequests.FLAG_SIGNALED, w.sendFlags());
            }
            assertEquals(1, cq.poll(wcs), "one completion: the last request's");
            assertEquals(509, wcs.wrId(0));
            if (Verbs.CHECKED) {
                assertEquals(0, qp.sendOutstanding(), "the completion of #10 frees all 11 slots");
            }
        }
    }

    @Test
    void aClosedRegionNamedByABulkCallIsCaughtAtThePostInEveryMode() {
        MemoryRegion other = region(4096, Access.LOCAL_WRITE);
        try (SendWorkRequests wrs = new SendWorkRequests(8, 1)) {
            wrs.writes(4, 1, 0x1000L, 0, 0x2222, other, 0, 16, 16).signaled();
            long before = p.wqeCount();
            other.close();
            InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> qp.postSend(wrs));
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
            assertEquals(before, p.wqeCount(), "nothing was posted");
            ResourceClosedException c = assertThrows(
                    ResourceClosedException.class, () -> wrs.clear().writes(1, 1, 0, 0, 1, other, 0, 0, 8));
            assertEquals(Errno.EBADF, c.errno());
            assertEquals(0, wrs.size(), "a closed region is refused before anything is added");
        }
    }

    /** Runs {@code call}, expecting {@code type}, and asserts that the chain's bytes and its count did not change. */
    private static <T extends VerbsException> T refusedWithoutWriting(
            SendWorkRequests wrs, Class<T> type, Executable call) {
        byte[] bytes = wrs.segment().toArray(JAVA_BYTE);
        byte[] sgeBytes = MemorySegment.ofAddress(
                        ibv_send_wr.sg_list(sendWr(wrs, 0)).address())
                .reinterpret(ibv_sge.sizeof() * wrs.capacity())
                .toArray(JAVA_BYTE);
        int size = wrs.size();
        T e = assertThrows(type, call);
        assertEquals(size, wrs.size(), "the chain holds what it held");
        assertArrayEquals(bytes, wrs.segment().toArray(JAVA_BYTE), "no request was written");
        assertArrayEquals(
                sgeBytes,
                MemorySegment.ofAddress(ibv_send_wr.sg_list(sendWr(wrs, 0)).address())
                        .reinterpret(ibv_sge.sizeof() * wrs.capacity())
                        .toArray(JAVA_BYTE),
                "no SGE was written");
        return e;
    }

    @Test
    void capacityAndCountAreCheckedInEveryModeBeforeAnythingIsWritten() {
        SendWorkRequests wrs = new SendWorkRequests(8, 1);
        {
            wrs.write(1, 0, 1).sge(mr, 0, 8).writes(3, 2, 0, 0, 1, mr, 0, 8, 8);
            QueueFullException full =
                    refusedWithoutWriting(wrs, QueueFullException.class, () -> wrs.writes(5, 9, 0, 0, 1, mr, 0, 8, 8));
            assertEquals(Errno.ENOMEM, full.errno());
            assertTrue(full.getMessage().contains("capacity of 8"), full.getMessage());
            assertEquals(
                    Errno.EINVAL,
                    refusedWithoutWriting(
                                    wrs, InvalidRequestException.class, () -> wrs.writes(0, 9, 0, 0, 1, mr, 0, 8, 8))
                            .errno());
            refusedWithoutWriting(wrs, InvalidRequestException.class, () -> wrs.writes(-1, 9, 0, 0, 1, mr, 0, 8, 8));
            wrs.writes(4, 5, 0, 0, 1, mr, 0, 8, 8); // exactly the room that is left
            assertEquals(8, wrs.size());
            refusedWithoutWriting(wrs, QueueFullException.class, () -> wrs.writes(1, 9, 0, 0, 1, mr, 0, 8, 8));
            wrs.close();
            assertThrows(ResourceClosedException.class, () -> wrs.writes(1, 9, 0, 0, 1, mr, 0, 8, 8));
        }
    }

    @Test
    void regionBoundsAreCheckedForTheWholeRangeInCheckedMode() {
        org.junit.jupiter.api.Assumptions.assumeTrue(
                Verbs.CHECKED, "unchecked mode drops SGE bounds (see the next test)");
        try (SendWorkRequests wrs = new SendWorkRequests(40, 1)) {
            wrs.write(1, 0, 1).sge(mr, 0, 8);
            // 32 SGEs of 128 bytes with a stride of 128 fill the 4 KiB region exactly
            wrs.writes(32, 2, 0, 0, 1, mr, 0, 128, 128);
            wrs.clear().write(1, 0, 1).sge(mr, 0, 8);
            InvalidRequestException last = refusedWithoutWriting(
                    wrs, InvalidRequestException.class, () -> wrs.writes(32, 2, 0, 0, 1, mr, 1, 128, 128));
            assertEquals(Errno.EINVAL, last.errno());
            assertTrue(last.getMessage().contains("outside the registered region"), last.getMessage());
            // the first SGE outside; a negative stride running below offset 0; a stride that overflows a long
            refusedWithoutWriting(wrs, InvalidRequestException.class, () -> wrs.writes(2, 2, 0, 0, 1, mr, 4096, 0, 1));
            refusedWithoutWriting(wrs, InvalidRequestException.class, () -> wrs.writes(3, 2, 0, 0, 1, mr, 100, -64, 8));
            refusedWithoutWriting(
                    wrs,
                    InvalidRequestException.class,
                    () -> wrs.writes(3, 2, 0, 0, 1, mr, 0, Long.MAX_VALUE / 2 + 1, 8));
            refusedWithoutWriting(wrs, InvalidRequestException.class, () -> wrs.writes(1, 2, 0, 0, 1, mr, 0, 0, -1));
            // a negative stride that stays inside is fine: the first and the last SGE bound the rest
            wrs.writes(3, 2, 0, 0, 1, mr, 200, -64, 8);
            assertEquals(mr.address() + 72, fields(wrs, 3)[7]);
        }
    }

    @Test
    void uncheckedModeSkipsTheBoundsButNotTheLiveness() {
        org.junit.jupiter.api.Assumptions.assumeFalse(Verbs.CHECKED, "the unchecked-mode execution");
        try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            wrs.writes(2, 1, 0, 0, 1, mr, 4090, 64, 64); // beyond the region: unchecked mode's contract, as with sge()
            assertEquals(2, wrs.size());
            assertEquals(mr.address() + 4090 + 64, fields(wrs, 1)[7]);
            MemoryRegion other = region(64, Access.LOCAL_WRITE);
            other.close();
            refusedWithoutWriting(wrs, ResourceClosedException.class, () -> wrs.writes(1, 3, 0, 0, 1, other, 0, 0, 8));
        }
    }
}
