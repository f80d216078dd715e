package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.QueuePairExLayout;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the extended queue pair over the stand-in provider, whose create_qp_ex makes a
 * {@code struct verbs_qp}-shaped QP with an {@code ibv_wr_*} builder for each operation asked for
 * (NULL for the rest) and records every builder and setter call in its WQE ring (and counts any
 * call outside {@code wr_start} .. {@code wr_complete}/{@code wr_abort}): the same chain posted
 * classic and extended reaches the provider with the same fields, every opcode included; the
 * completions come back to the same accounting.
 */
class ExtendedPostingHostTest extends ExtendedStandInTest {
    @Test
    void creationAsksForTheOperationsAndTheProviderGetsAnExtendedQp() {
        try (QueuePair qp = extended(o, EnumSet.of(SendOperation.SEND, SendOperation.RDMA_WRITE), 8, 1)) {
            assertEquals(QueuePairExLayout.WITH_SEND | QueuePairExLayout.WITH_RDMA_WRITE, p.lastCreateQpExOps());
            assertEquals(
                    QueuePairExLayout.INIT_ATTR_PD | QueuePairExLayout.INIT_ATTR_SEND_OPS_FLAGS,
                    p.lastCreateQpExMask());
            assertEquals(0x4343, qp.qpNumber());
            assertEquals(1 << SendWorkRequests.OP_SEND | 1 << SendWorkRequests.OP_RDMA_WRITE, qp.extended.opcodes);
        }
    }

    @Test
    void everyOpcodeReachesTheProviderAsTheClassicPostWritesIt() {
        MemoryRegion mwr = bindable(o);
        try (QueuePair qp = extended(o, EnumSet.complementOf(EnumSet.of(SendOperation.ATOMIC_WRITE)), 64, 2);
                MemoryWindow mw = o.pd.allocateWindow(MemoryWindow.Type.TYPE_2);
                SendWorkRequests wrs = new SendWorkRequests(16, 2, 64)) {
            MemoryRegion mr = o.mr;
            byte[] hello = "hello, ".getBytes(StandardCharsets.US_ASCII);
            byte[] world = "extended world".getBytes(StandardCharsets.US_ASCII);
            wrs.write(1, 0x10000, 0x77).sge(mr, 0, 100).sge(mr, 200, 28).signaled();
            wrs.writeWithImmediate(2, 0x20000, 0x78, 0xCAFE).sge(mr, 128, 64);
            wrs.send(3).inline(MemorySegment.ofArray(hello)).inline(MemorySegment.ofArray(world));
            wrs.sendWithImmediate(4, 0xBEEF).sge(mr, 256, 32).solicited();
            wrs.read(5, 0x30000, 0x79).sge(mr, 512, 256).fence();
            wrs.compareAndSwap(6, 0x40008, 0x7a, 11, 22).sge(mr, 1024, 8);
            wrs.fetchAndAdd(7, 0x50010, 0x7b, 33).sge(mr, 1032, 8).signaled();
            wrs.bindWindow(8, mw, mwr, 64, 1024, EnumSet.of(Access.REMOTE_WRITE));
            wrs.localInvalidate(9, 0x5566);
            wrs.sendWithInvalidate(10, 0x7788).sge(mr, 2048, 16).signaled();
            int n = 10;
            qp.postSend(wrs);
            assertEquals(0, p.wrExtendedWqes());
            long swapClassic = p.lastSwap();
            // the same descriptors again through ibv_wr_*
            qp.postSendExtended(wrs);
            assertEquals(n, p.wrExtendedWqes());
            assertEquals(1, p.wrCompletes());
            assertEquals(2L * n, p.wqeCount());
            assertEquals(22, swapClassic);
            assertEquals(22, p.lastSwap());
            for (int i = 0; i < n; i++) {
                StandInProvider.Wqe c = p.wqe(i), x = p.wqe(n + i);
                String at = "request #" + i + " (opcode " + c.opcode() + ")";
                assertEquals(c.wrId(), x.wrId(), at);
                assertEquals(c.opcode(), x.opcode(), at);
                assertEquals(c.sendFlags(), x.sendFlags(), at);
                assertEquals(c.remoteAddr(), x.remoteAddr(), at);
                assertEquals(c.rkey(), x.rkey(), at);
                assertEquals(c.imm(), x.imm(), at);
                assertEquals(c.totalLength(), x.totalLength(), at);
                assertEquals(p.wqeOperand(i), p.wqeOperand(n + i), at);
                if (i != 2 && i != 7 && i != 8) { // inline and the requests without SGEs: below
                    assertEquals(c.addr(), x.addr(), at);
                    assertEquals(c.length(), x.length(), at);
                    assertEquals(c.lkey(), x.lkey(), at);
                    assertEquals(c.numSge(), x.numSge(), at);
                }
            }
            // the two inline pieces lie next to each other: one wr_set_inline_data of all the bytes
            StandInProvider.Wqe inl = p.wqe(n + 2);
            assertEquals(1, inl.numSge());
            assertEquals(hello.length + world.length, inl.totalLength());
            assertArrayEquals(
                    (new String(hello, StandardCharsets.US_ASCII) + new String(world, StandardCharsets.US_ASCII))
                            .getBytes(StandardCharsets.US_ASCII),
                    p.lastInline());
            assertEquals(SendWorkRequests.FLAG_INLINE, inl.sendFlags() & SendWorkRequests.FLAG_INLINE);
            // values as given: the bind's rkey moved on from the window's, CAS operands, immediates big-endian
            StandInProvider.Wqe bind = p.wqe(n + 7);
            assertEquals(SendWorkRequests.OP_BIND_MW, bind.opcode());
            assertEquals(mw.rkey(), bind.rkey());
            assertEquals(mwr.address() + 64, bind.remoteAddr());
            assertEquals(1024, bind.totalLength());
            assertEquals(Access.REMOTE_WRITE.bit(), bind.imm());
            assertEquals(mw.address, p.wqeOperand(n + 7));
            assertEquals(11, p.wqeOperand(n + 5));
            assertEquals(0x7a, p.wqe(n + 5).rkey());
            assertEquals(0x40008, p.wqe(n + 5).remoteAddr());
            assertEquals(Integer.reverseBytes(0xCAFE), p.wqe(n + 1).imm());
            assertEquals(0x5566, p.wqe(n + 8).imm());
            assertEquals(0x7788, p.wqe(n + 9).imm());
            // the signaled ones completed: 3 per post, reaped through the same accounting
            WorkCompletions wc = new WorkCompletions(16);
            assertEquals(6, o.cq.poll(wc));
            assertEquals(0, qp.sendOutstanding());
            assertEquals(10, wc.wrId(5));
            assertEquals(CompletionOpcode.SEND, wc.opcode(5));
        } finally {
            mwr.close();
        }
    }

    @Test
    void inlineBytesOfARegionAndAPieceAreGatheredIntoOneSetInlineData() {
        try (QueuePair qp = extended(o, EnumSet.of(SendOperation.SEND), 8, 2);
                SendWorkRequests wrs = new SendWorkRequests(4, 2, 64)) {
            byte[] region = "from the region ".getBytes(StandardCharsets.US_ASCII);
            byte[] piece = "and a piece".getBytes(StandardCharsets.US_ASCII);
            o.mr.segment().asSlice(300, region.length).copyFrom(MemorySegment.ofArray(region));
            wrs.send(1)
                    .sge(o.mr, 300, region.length)
                    .inline(MemorySegment.ofArray(piece))
                    .signaled();
            qp.postSendExtended(wrs);
            StandInProvider.Wqe w = p.wqe(0);
            assertEquals(1, w.numSge(), "one wr_set_inline_data, never wr_set_inline_data_list");
            assertEquals(region.length + piece.length, w.totalLength());
            assertArrayEquals(
                    (new String(region, StandardCharsets.US_ASCII) + new String(piece, StandardCharsets.US_ASCII))
                            .getBytes(StandardCharsets.US_ASCII),
                    p.lastInline());
            assertEquals(1, o.cq.poll(new WorkCompletions(4)));
            // more than maxInlineData (64) in all: nothing reaches the provider
            wrs.clear()
                    .send(2)
                    .sge(o.mr, 0, 60)
                    .inline(MemorySegment.ofArray(piece))
                    .signaled();
            HostMisuseTest.refused("ibv_wr_complete", 22, () -> qp.postSendExtended(wrs), "none of them was posted");
            assertEquals(1, p.wqeCount());
            assertEquals(0, qp.sendOutstanding());
            assertTrue(!qp.extended.sgeListMiscounted, "the stand-in is not rxe");
        }
    }

    @Test
    void aFailedCompletePostsNothingAndTheSlotsComeBack() {
        try (QueuePair qp = extended(o, EnumSet.of(SendOperation.RDMA_WRITE), 4, 1);
                SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
            for (int i = 0; i < 4; i++) {
                wrs.write(i, 0x1000, 1).sge(o.mr, 0, 64);
            }
            wrs.signaled();
            p.failPostAt(2, 12);
            VerbsException e = HostMisuseTest.refused(
                    "ibv_wr_complete", 12, () -> qp.postSendExtended(wrs), "none of them was posted");
            assertNotEquals(null, e);
            assertEquals(0, p.wqeCount(), "wr_complete posts all or nothing");
            assertEquals(0, qp.sendOutstanding());
            p.failPostAt(-1, 0);
            qp.postSendExtended(wrs); // all four slots are free again
            assertEquals(4, p.wqeCount());
            assertEquals(4, qp.sendOutstanding());
            assertEquals(1, o.cq.poll(new WorkCompletions(4)));
            assertEquals(0, qp.sendOutstanding());
        }
    }

    @Test
    void aWindowIsAllocatedBoundAndDeallocatedThroughTheProvider() {
        MemoryRegion mwr = bindable(o);
        try {
            int live = p.mwLive();
            MemoryWindow mw = o.pd.allocateWindow(MemoryWindow.Type.TYPE_2);
            assertEquals(live + 1, p.mwLive());
            int allocated = mw.rkey();
            try (SendWorkRequests wrs = new SendWorkRequests(4, 1)) {
                wrs.bindWindow(1, mw, mwr, 0, 4096, EnumSet.of(Access.REMOTE_READ));
                assertEquals((allocated & 0xffffff00) | ((allocated + 1) & 0xff), mw.rkey(), "ibv_inc_rkey");
                assertEquals(allocated & 0xffffff00, mw.rkey() & 0xffffff00, "the index part stays");
            }
            assertTrue(mw.toString().contains("TYPE_2"), mw.toString());
            mw.close();
            assertEquals(live, p.mwLive());
            mwr.close(); // released by the window's close
        } finally {
            if (mwr.isOpen()) {
                mwr.close();
            }
        }
    }

    /**
     * A type 1 window through the provider's bind_mw op (the stand-in's posts one IBV_WR_BIND_MW
     * request, as rxe's does): every field of {@code struct ibv_mw_bind} reaches it, the rkey moves
     * on, the bind counts as a send and its completion frees the slot; the unbind (length 0) names
     * the same region and releases it.
     */
    @Test
    void aType1WindowIsBoundThroughBindMwAndCountedAsASend() {
        MemoryRegion mwr = registeredBindable(o);
        MemoryWindow mw = o.pd.allocateWindow(MemoryWindow.Type.TYPE_1);
        try (QueuePair qp = o.rcQueuePair(4, 4);
                WorkCompletions wc = new WorkCompletions(4)) {
            int allocated = mw.rkey();
            int rkey = mw.bind(qp, 21, mwr, 64, 1024, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ), true);
            assertEquals((allocated & 0xffffff00) | ((allocated + 1) & 0xff), rkey, "ibv_inc_rkey");
            assertEquals(rkey, mw.rkey());
            assertEquals(1, qp.sendOutstanding(), "the bind holds a send-queue slot");
            StandInProvider.Wqe w = p.wqe(0);
            assertEquals(21, w.wrId());
            assertEquals(SendWorkRequests.OP_BIND_MW, w.opcode());
            assertEquals(SendWorkRequests.FLAG_SIGNALED, w.sendFlags());
            assertEquals(rkey, w.rkey());
            assertEquals(mwr.address() + 64, w.remoteAddr());
            assertEquals(1024, w.totalLength());
            assertEquals(mwr.lkey(), w.lkey(), "bind_info.mr is the region");
            assertEquals(Access.REMOTE_WRITE.bit() | Access.REMOTE_READ.bit(), w.imm());
            assertEquals(mw.address, p.wqeOperand(0));
            refused("ibv_dereg_mr", Errno.EBUSY, mwr::close, "open object");
            assertEquals(1, o.cq.poll(wc));
            assertEquals(CompletionOpcode.BIND_MW, wc.opcode(0));
            assertEquals(0, qp.sendOutstanding());
            // unsignaled: no completion; the slot stays counted until a later signaled one
            int again = mw.unbind(qp, 22, false);
            assertEquals((rkey & 0xffffff00) | ((rkey + 1) & 0xff), again);
            StandInProvider.Wqe u = p.wqe(1);
            assertEquals(0, u.totalLength());
            assertEquals(0, u.remoteAddr());
            assertEquals(0, u.imm());
            assertEquals(mwr.lkey(), u.lkey(), "rxe reads the region's lkey even for length 0");
            assertEquals(0, u.sendFlags());
            assertEquals(1, qp.sendOutstanding());
            assertEquals(0, o.cq.poll(wc));
            mwr.close(); // no longer bound
        } finally {
            mw.close();
            if (mwr.isOpen()) {
                mwr.close();
            }
        }
    }
}
