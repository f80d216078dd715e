package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.generated.ibverbs.ibv_cq_ex;
import org.verbs4j.natives.generated.ibverbs.ibv_cq_init_attr_ex;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr_ex;
import org.verbs4j.natives.generated.ibverbs.ibv_port_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_recv_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_send_wr;
import org.verbs4j.natives.generated.ibverbs.ibv_sge;
import org.verbs4j.natives.generated.ibverbs.ibv_wc;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;
import org.verbs4j.testing.StandInProvider;
import org.verbs4j.testing.StandInProvider.ExtendedOp;
import org.verbs4j.testing.StandInProvider.Op;

/**
 * Proves, against the stand-in provider, that {@link InlineVerbs} reaches the provider op slots
 * the way verbs.h's static inline functions do: the right slot, the right arguments, the
 * provider's return value and out-parameters.
 */
class InlineDispatchTest {
    private static final long BAD_WR_SENTINEL = 0x5EED_5EEDL;

    private StandInProvider p;
    private Arena arena;

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofConfined();
    }

    @AfterEach
    void close() {
        if (arena != null) {
            arena.close();
        }
        if (p != null) {
            p.close();
        }
    }

    private long qp() {
        return p.qp().address();
    }

    private long cq() {
        return p.cq().address();
    }

    /** A pointer-sized out-parameter holding a sentinel. */
    private MemorySegment badWr() {
        MemorySegment s = arena.allocate(ADDRESS);
        s.set(JAVA_LONG, 0, BAD_WR_SENTINEL);
        return s;
    }

    /** {@code n} linked send WRs; WR i has wr_id 100+i, one SGE of length 10*(i+1) (WR 1 has two SGEs). */
    private MemorySegment sendChain(int n, boolean signaled) {
        MemorySegment wrs = ibv_send_wr.allocateArray(n, arena);
        MemorySegment sges = ibv_sge.allocateArray(2L * n, arena);
        int[] opcodes = {ibverbs_h.IBV_WR_RDMA_WRITE(), ibverbs_h.IBV_WR_SEND(), ibverbs_h.IBV_WR_RDMA_WRITE_WITH_IMM()
        };
        for (int i = 0; i < n; i++) {
            MemorySegment wr = ibv_send_wr.asSlice(wrs, i);
            MemorySegment sge = ibv_sge.asSlice(sges, 2L * i);
            ibv_sge.addr(sge, 0x1000L * (i + 1));
            ibv_sge.length(sge, 10 * (i + 1));
            ibv_sge.lkey(sge, 0x70 + i);
            int numSge = 1;
            if (i == 1) {
                MemorySegment second = ibv_sge.asSlice(sges, 2L * i + 1);
                ibv_sge.addr(second, 0x9000L);
                ibv_sge.length(second, 5);
                ibv_sge.lkey(second, 0x99);
                numSge = 2;
            }
            ibv_send_wr.wr_id(wr, 100 + i);
            ibv_send_wr.next(wr, i + 1 < n ? ibv_send_wr.asSlice(wrs, i + 1) : MemorySegment.NULL);
            ibv_send_wr.sg_list(wr, sge);
            ibv_send_wr.num_sge(wr, numSge);
            ibv_send_wr.opcode(wr, opcodes[i % opcodes.length]);
            ibv_send_wr.send_flags(wr, signaled ? ibverbs_h.IBV_SEND_SIGNALED() : 0);
            ibv_send_wr.imm_data(wr, 0xA0B0C0D0 + i);
            MemorySegment rdma = ibv_send_wr.wr.rdma(ibv_send_wr.wr(wr));
            ibv_send_wr.wr.rdma.remote_addr(rdma, 0xFEED_0000L + i);
            ibv_send_wr.wr.rdma.rkey(rdma, 0x500 + i);
        }
        return wrs;
    }

    @Test
    void contextOpReadsTheStandInFunctionPointers() {
        MemorySegment ctx = p.context();
        assertEquals(
                StandInProvider.symbol("standin_post_send").address(),
                InlineVerbs.contextOp(ctx, ContextLayout.OPS_POST_SEND).address());
        assertEquals(
                StandInProvider.symbol("standin_post_recv").address(),
                InlineVerbs.contextOp(ctx, ContextLayout.OPS_POST_RECV).address());
        assertEquals(
                StandInProvider.symbol("standin_post_srq_recv").address(),
                InlineVerbs.contextOp(ctx, ContextLayout.OPS_POST_SRQ_RECV).address());
        assertEquals(
                StandInProvider.symbol("standin_poll_cq").address(),
                InlineVerbs.contextOp(ctx, ContextLayout.OPS_POLL_CQ).address());
        assertEquals(
                StandInProvider.symbol("standin_req_notify_cq").address(),
                InlineVerbs.contextOp(ctx, ContextLayout.OPS_REQ_NOTIFY_CQ).address());
        // ops._compat_query_device (context + 8): a slot the stand-in never sets
        assertEquals(0, InlineVerbs.contextOp(ctx, 8).address(), "unset op is NULL");
        assertEquals(ctx.address(), InlineVerbs.contextOf(p.qp()).address());
        assertEquals(ctx.address(), InlineVerbs.contextOf(p.cq()).address());
        assertEquals(ctx.address(), InlineVerbs.contextOf(p.srq()).address());
    }

    @Test
    void postSendChainThenPollThreeCompletions() {
        MemorySegment wrs = sendChain(3, true);
        MemorySegment bad = badWr();
        MemorySegment postSend = InlineVerbs.contextOp(InlineVerbs.contextOf(p.qp()), ContextLayout.OPS_POST_SEND);

        int rc = InlineVerbs.postSend(postSend, qp(), wrs.address(), bad.address());

        assertEquals(0, rc);
        assertEquals(1, p.calls(Op.POST_SEND));
        assertEquals(0, p.calls(Op.POST_RECV));
        assertEquals(qp(), p.lastQp());
        assertEquals(wrs.address(), p.lastWr());
        assertEquals(bad.address(), p.lastBadWrPtr());
        assertEquals(BAD_WR_SENTINEL, bad.get(JAVA_LONG, 0), "bad_wr must be untouched on success");
        assertEquals(3, p.wqeCount());
        for (int i = 0; i < 3; i++) {
            StandInProvider.Wqe w = p.wqe(i);
            assertEquals(100 + i, w.wrId());
            assertEquals(0x1000L * (i + 1), w.addr());
            assertEquals(10 * (i + 1), w.length());
            assertEquals(0x70 + i, w.lkey());
            assertEquals(ibverbs_h.IBV_SEND_SIGNALED(), w.sendFlags());
            assertEquals(0xFEED_0000L + i, w.remoteAddr());
            assertEquals(0x500 + i, w.rkey());
            assertEquals(0xA0B0C0D0 + i, w.imm());
        }
        assertEquals(ibverbs_h.IBV_WR_SEND(), p.wqe(1).opcode());
        assertEquals(2, p.wqe(1).numSge());
        assertEquals(3, p.pendingCompletions());

        MemorySegment wc = ibv_wc.allocateArray(8, arena);
        MemorySegment poll = InlineVerbs.contextOp(InlineVerbs.contextOf(p.cq()), ContextLayout.OPS_POLL_CQ);
        int n = InlineVerbs.pollCq(poll, cq(), 8, wc.address());

        assertEquals(3, n);
        assertEquals(cq(), p.lastCq());
        assertEquals(8, p.lastNumEntries());
        assertEquals(wc.address(), p.lastWcPtr());
        int[] wcOpcodes = {ibverbs_h.IBV_WC_RDMA_WRITE(), ibverbs_h.IBV_WC_SEND(), ibverbs_h.IBV_WC_RDMA_WRITE()};
        int[] byteLens = {10, 20 + 5, 30};
        for (int i = 0; i < 3; i++) {
            MemorySegment e = ibv_wc.asSlice(wc, i);
            assertEquals(100 + i, ibv_wc.wr_id(e), "wr_id of completion " + i);
            assertEquals(ibverbs_h.IBV_WC_SUCCESS(), ibv_wc.status(e));
            assertEquals(wcOpcodes[i], ibv_wc.opcode(e));
            assertEquals(byteLens[i], ibv_wc.byte_len(e), "byte_len of completion " + i);
            assertEquals(StandInProvider.QP_NUM, ibv_wc.qp_num(e));
            // the hand-placed offsets read the same values
            assertEquals(100 + i, e.get(JAVA_LONG, CompletionLayout.WR_ID));
            assertEquals(byteLens[i], e.get(java.lang.foreign.ValueLayout.JAVA_INT, CompletionLayout.BYTE_LEN));
        }
        assertEquals(0, InlineVerbs.pollCq(poll, cq(), 8, wc.address()), "the CQ is drained");
        assertEquals(2, p.calls(Op.POLL_CQ));
    }

    @Test
    void pollReturnsAtMostNumEntries() {
        MemorySegment wrs = sendChain(3, true);
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_SEND);
        assertEquals(0, InlineVerbs.postSend(fn, qp(), wrs.address(), badWr().address()));
        MemorySegment wc = ibv_wc.allocateArray(2, arena);
        MemorySegment poll = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POLL_CQ);
        assertEquals(2, InlineVerbs.pollCq(poll, cq(), 2, wc.address()));
        assertEquals(2, p.lastNumEntries());
        assertEquals(101, ibv_wc.wr_id(ibv_wc.asSlice(wc, 1)));
        assertEquals(1, InlineVerbs.pollCq(poll, cq(), 2, wc.address()));
        assertEquals(102, ibv_wc.wr_id(wc));
    }

    @Test
    void unsignaledWorkRequestsProduceNoCompletion() {
        MemorySegment wrs = sendChain(3, false);
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_SEND);
        assertEquals(0, InlineVerbs.postSend(fn, qp(), wrs.address(), badWr().address()));
        assertEquals(3, p.wqeCount());
        assertEquals(0, p.pendingCompletions());
    }

    @Test
    void postSendErrorReturnsTheErrnoAndPointsBadWrAtTheFailingRequest() {
        MemorySegment wrs = sendChain(3, true);
        MemorySegment bad = badWr();
        p.failPostAt(1, Errno.ENOMEM);
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_SEND);

        int rc = InlineVerbs.postSend(fn, qp(), wrs.address(), bad.address());

        assertEquals(Errno.ENOMEM, rc);
        assertEquals(ibv_send_wr.asSlice(wrs, 1).address(), bad.get(JAVA_LONG, 0), "*bad_wr names WR #1");
        assertEquals(wrs.address() + WorkRequestLayout.SEND_WR_SIZE, bad.get(JAVA_LONG, 0));
        assertEquals(1, p.wqeCount(), "only WR #0 was posted");
        assertEquals(1, p.pendingCompletions());
    }

    private static final MethodHandle POST_SEND_CRITICAL = InlineVerbs.dataPath(InlineVerbs.POST, true);
    private static final MethodHandle POST_SEND_STANDARD = InlineVerbs.dataPath(InlineVerbs.POST, false);
    private static final MethodHandle POLL_CQ_CRITICAL = InlineVerbs.dataPath(InlineVerbs.POLL, true);
    private static final MethodHandle POLL_CQ_STANDARD = InlineVerbs.dataPath(InlineVerbs.POLL, false);

    @Test
    void bothLinkagesOfTheDataPathHandlesDispatch() throws Throwable {
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_SEND);
        MemorySegment wrs = sendChain(1, true);
        MemorySegment bad = badWr();
        assertEquals(0, (int) POST_SEND_CRITICAL.invokeExact(fn, qp(), wrs.address(), bad.address()));
        assertEquals(0, (int) POST_SEND_STANDARD.invokeExact(fn, qp(), wrs.address(), bad.address()));
        assertEquals(2, p.calls(Op.POST_SEND));
        MemorySegment poll = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POLL_CQ);
        MemorySegment wc = ibv_wc.allocateArray(4, arena);
        assertEquals(1, (int) POLL_CQ_CRITICAL.invokeExact(poll, cq(), 1, wc.address()));
        assertEquals(1, (int) POLL_CQ_STANDARD.invokeExact(poll, cq(), 4, wc.address()));
        assertEquals(4, p.lastNumEntries());
        assertEquals(100, ibv_wc.wr_id(wc));
    }

    @Test
    void postRecvReachesThePostRecvSlot() {
        MemorySegment wrs = ibv_recv_wr.allocateArray(2, arena);
        MemorySegment sge = ibv_sge.allocate(arena);
        ibv_sge.addr(sge, 0xABC000L);
        ibv_sge.length(sge, 4096);
        for (int i = 0; i < 2; i++) {
            MemorySegment wr = ibv_recv_wr.asSlice(wrs, i);
            ibv_recv_wr.wr_id(wr, 7 + i);
            ibv_recv_wr.next(wr, i == 0 ? ibv_recv_wr.asSlice(wrs, 1) : MemorySegment.NULL);
            ibv_recv_wr.sg_list(wr, sge);
            ibv_recv_wr.num_sge(wr, 1);
        }
        MemorySegment bad = badWr();
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_RECV);

        assertEquals(0, InlineVerbs.postRecv(fn, qp(), wrs.address(), bad.address()));

        assertEquals(1, p.calls(Op.POST_RECV));
        assertEquals(0, p.calls(Op.POST_SEND));
        assertEquals(0, p.calls(Op.POST_SRQ_RECV));
        assertEquals(qp(), p.lastRecvQp());
        assertEquals(wrs.address(), p.lastRecvWr());
        assertEquals(bad.address(), p.lastRecvBadWrPtr());
        assertEquals(2, p.pendingRecvs());
        assertEquals(7, p.deliverRecv(1234, true, 0x11223344));
        MemorySegment wc = ibv_wc.allocate(arena);
        assertEquals(
                1,
                InlineVerbs.pollCq(
                        InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POLL_CQ), cq(), 1, wc.address()));
        assertEquals(7, ibv_wc.wr_id(wc));
        assertEquals(ibverbs_h.IBV_WC_RECV_RDMA_WITH_IMM(), ibv_wc.opcode(wc));
        assertEquals(1234, ibv_wc.byte_len(wc));
        assertEquals(0x11223344, ibv_wc.imm_data(wc));
        assertEquals(ibverbs_h.IBV_WC_WITH_IMM(), ibv_wc.wc_flags(wc));

        p.failPostAt(0, Errno.EINVAL);
        assertEquals(Errno.EINVAL, InlineVerbs.postRecv(fn, qp(), wrs.address(), bad.address()));
        assertEquals(wrs.address(), bad.get(JAVA_LONG, 0));
    }

    @Test
    void postSrqRecvReachesThePostSrqRecvSlot() {
        MemorySegment wr = ibv_recv_wr.allocate(arena);
        ibv_recv_wr.wr_id(wr, 99);
        MemorySegment bad = badWr();
        MemorySegment fn = InlineVerbs.contextOp(InlineVerbs.contextOf(p.srq()), ContextLayout.OPS_POST_SRQ_RECV);

        assertEquals(0, InlineVerbs.postSrqRecv(fn, p.srq().address(), wr.address(), bad.address()));

        assertEquals(1, p.calls(Op.POST_SRQ_RECV));
        assertEquals(0, p.calls(Op.POST_RECV));
        assertEquals(p.srq().address(), p.lastSrq());
        assertEquals(wr.address(), p.lastSrqWr());
        assertEquals(bad.address(), p.lastSrqBadWrPtr());
        assertEquals(1, p.pendingRecvs());
    }

    @Test
    void reqNotifyCqPassesTheSolicitedFlag() {
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_REQ_NOTIFY_CQ);
        assertEquals(0, InlineVerbs.reqNotifyCq(fn, cq(), 1));
        assertEquals(cq(), p.lastNotifyCq());
        assertEquals(1, p.lastSolicited());
        assertEquals(0, InlineVerbs.reqNotifyCq(fn, cq(), 0));
        assertEquals(0, p.lastSolicited());
        assertEquals(2, p.calls(Op.REQ_NOTIFY_CQ));
        p.setControlRc(Errno.EIO);
        assertEquals(Errno.EIO, InlineVerbs.reqNotifyCq(fn, cq(), 0));
    }

    @Test
    void pollReturnsTheProvidersNegativeValue() {
        p.failPoll(-2);
        MemorySegment wc = ibv_wc.allocateArray(4, arena);
        MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POLL_CQ);
        assertEquals(-2, InlineVerbs.pollCq(fn, cq(), 4, wc.address()));
        p.failPoll(-5);
        assertEquals(-5, InlineVerbs.pollCq(fn, cq(), 4, wc.address()));
        p.failPoll(0);
        assertEquals(0, InlineVerbs.pollCq(fn, cq(), 4, wc.address()));
    }

    @Test
    void queuedErrorCompletionIsPolledWithItsStatus() {
        assertEquals(
                0,
                p.queueCompletion(
                        555, ibverbs_h.IBV_WC_RETRY_EXC_ERR(), ibverbs_h.IBV_WC_SEND(), 0, StandInProvider.QP_NUM));
        MemorySegment wc = ibv_wc.allocate(arena);
        assertEquals(
                1,
                InlineVerbs.pollCq(
                        InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POLL_CQ), cq(), 1, wc.address()));
        assertEquals(555, ibv_wc.wr_id(wc));
        assertEquals(12, ibv_wc.status(wc));
    }

    // ---- extended ops ------------------------------------------------------------------------

    @Test
    void verbsGetCtxMatchesVerbsH() {
        MemorySegment ext = p.context();
        MemorySegment plain = p.makeContext(false);
        assertEquals(p.referenceVerbsGetCtx(ext), InlineVerbs.verbsGetCtx(ext).address());
        assertEquals(
                ext.address() - ContextLayout.VERBS_CONTEXT_CONTEXT,
                InlineVerbs.verbsGetCtx(ext).address());
        assertEquals(0, p.referenceVerbsGetCtx(plain));
        assertEquals(0, InlineVerbs.verbsGetCtx(plain).address());
    }

    @Test
    void verbsGetCtxOpMatchesVerbsHForEveryContextKindAndSize() {
        MemorySegment ext = p.context();
        MemorySegment plain = p.makeContext(false);
        long[] offsets = {
            ContextLayout.VCTX_QUERY_PORT, ContextLayout.VCTX_QUERY_DEVICE_EX, ContextLayout.VCTX_CREATE_CQ_EX
        };
        String[] names = {"standin_query_port", "standin_query_device_ex", "standin_create_cq_ex"};
        ExtendedOp[] ops = ExtendedOp.values();
        for (int i = 0; i < ops.length; i++) {
            assertEquals(
                    StandInProvider.symbol(names[i]).address(),
                    InlineVerbs.verbsGetCtxOp(ext, offsets[i]).address());
            assertEquals(
                    p.referenceCtxOp(ext, ops[i]),
                    InlineVerbs.verbsGetCtxOp(ext, offsets[i]).address());
            assertEquals(0, InlineVerbs.verbsGetCtxOp(plain, offsets[i]).address(), "non-extended context: NULL");
            assertEquals(0, p.referenceCtxOp(plain, ops[i]));
        }
        // sz too small for an op: NULL, exactly where verbs.h's verbs_get_ctx_op says so
        long full = ContextLayout.VERBS_CONTEXT_SIZE;
        long[] sizes = {
            0,
            8,
            320,
            full - ContextLayout.VCTX_QUERY_DEVICE_EX - 1,
            full - ContextLayout.VCTX_QUERY_DEVICE_EX,
            full - ContextLayout.VCTX_CREATE_CQ_EX - 1,
            full - ContextLayout.VCTX_CREATE_CQ_EX,
            full - 1,
            full,
            4096
        };
        int nullSeen = 0, setSeen = 0;
        for (long sz : sizes) {
            p.setVerbsContextSz(ext, sz);
            for (int i = 0; i < ops.length; i++) {
                long ref = p.referenceCtxOp(ext, ops[i]);
                assertEquals(
                        ref,
                        InlineVerbs.verbsGetCtxOp(ext, offsets[i]).address(),
                        "verbs_get_ctx_op(" + ops[i] + ") with sz = " + sz);
                if (ref == 0) {
                    nullSeen++;
                } else {
                    setSeen++;
                }
            }
        }
        assertTrue(nullSeen > 5 && setSeen > 5, "the sweep must cover both outcomes");
        p.setVerbsContextSz(ext, full - 1);
        assertEquals(
                0,
                InlineVerbs.verbsGetCtxOp(ext, ContextLayout.VCTX_QUERY_PORT).address(),
                "query_port needs the full verbs_context");
        assertNotEquals(
                0,
                InlineVerbs.verbsGetCtxOp(ext, ContextLayout.VCTX_CREATE_CQ_EX).address());
    }

    @Test
    void queryPortUsesTheExtendedOpWithTheFullSize() {
        MemorySegment attr = arena.allocate(ibv_port_attr.layout());
        attr.fill((byte) 0x5A);

        InlineVerbs.queryPort(p.context(), 1, attr);

        assertEquals(1, p.calls(Op.QUERY_PORT));
        assertEquals(p.context().address(), p.lastPortCtx());
        assertEquals(1, p.lastPortNum());
        assertEquals(attr.address(), p.lastPortAttrPtr());
        assertEquals(52, p.lastPortAttrSize());
        assertEquals(ibv_port_attr.sizeof(), p.lastPortAttrSize());
        assertEquals(ibverbs_h.IBV_PORT_ACTIVE(), ibv_port_attr.state(attr));
        assertEquals((short) 0x1234, ibv_port_attr.lid(attr));
        assertEquals((short) 0xBEEF, ibv_port_attr.port_cap_flags2(attr), "the bytes past the compat 48 were filled");
        assertEquals(ibverbs_h.IBV_LINK_LAYER_ETHERNET(), ibv_port_attr.link_layer(attr));

        InlineVerbs.queryPort(p.context(), 2, attr);
        assertEquals(2, p.lastPortNum());
    }

    @Test
    void queryPortErrorBecomesNativeCallException() {
        p.setControlRc(Errno.EINVAL);
        MemorySegment attr = arena.allocate(ibv_port_attr.layout());
        NativeCallException e =
                assertThrows(NativeCallException.class, () -> InlineVerbs.queryPort(p.context(), 3, attr));
        assertEquals("ibv_query_port", e.verb());
        assertEquals(Errno.EINVAL, e.errno());
        assertEquals(3, p.lastPortNum());
    }

    @Test
    void queryDeviceExUsesTheExtendedOp() {
        MemorySegment attr = arena.allocate(ibv_device_attr_ex.layout());

        InlineVerbs.queryDeviceEx(p.context(), attr, ibv_device_attr_ex.sizeof());

        assertEquals(1, p.calls(Op.QUERY_DEVICE_EX));
        assertEquals(p.context().address(), p.lastQueryDeviceExCtx());
        assertEquals(0, p.lastQueryDeviceExInput(), "input is NULL, as ibv_query_device_ex(ctx, NULL, attr) passes");
        assertEquals(attr.address(), p.lastQueryDeviceExAttr());
        assertEquals(ibv_device_attr_ex.sizeof(), p.lastQueryDeviceExAttrSize());
        MemorySegment orig = ibv_device_attr_ex.orig_attr(attr);
        assertEquals(4242, ibv_device_attr.max_qp(orig));
        assertEquals(65535, ibv_device_attr.max_cqe(orig));
        assertEquals("standin-fw 1.0", ibv_device_attr.fw_ver(orig).getString(0));
        assertEquals(0xABCDEFL, ibv_device_attr_ex.completion_timestamp_mask(attr));
        assertEquals(0x10000L, ibv_device_attr_ex.max_dm_size(attr));
    }

    @Test
    void queryDeviceExErrorBecomesNativeCallException() {
        p.setControlRc(Errno.EINVAL);
        MemorySegment attr = arena.allocate(ibv_device_attr_ex.layout());
        NativeCallException e = assertThrows(
                NativeCallException.class,
                () -> InlineVerbs.queryDeviceEx(p.context(), attr, ibv_device_attr_ex.sizeof()));
        assertEquals("ibv_query_device_ex", e.verb());
        assertEquals(Errno.EINVAL, e.errno());
    }

    @Test
    void createCqExUsesTheExtendedOp() {
        MemorySegment attr = ibv_cq_init_attr_ex.allocate(arena);
        ibv_cq_init_attr_ex.cqe(attr, 77);

        MemorySegment cqx = InlineVerbs.createCqEx(p.context(), attr);
        try {
            assertNotEquals(0, cqx.address());
            assertEquals(1, p.calls(Op.CREATE_CQ_EX));
            assertEquals(p.context().address(), p.lastCreateCqExCtx());
            assertEquals(attr.address(), p.lastCreateCqExAttr());
            MemorySegment c = cqx.reinterpret(ibv_cq_ex.sizeof());
            assertEquals(77, ibv_cq_ex.cqe(c));
            assertEquals(p.context().address(), ibv_cq_ex.context(c).address());
        } finally {
            p.free(cqx);
        }
    }

    @Test
    void createCqExFailureCarriesTheCapturedErrno() {
        p.setControlRc(Errno.ENOMEM);
        MemorySegment attr = ibv_cq_init_attr_ex.allocate(arena);
        NativeCallException e =
                assertThrows(NativeCallException.class, () -> InlineVerbs.createCqEx(p.context(), attr));
        assertEquals("ibv_create_cq_ex", e.verb());
        assertEquals(Errno.ENOMEM, e.errno(), "errno set by the op must be captured at the call");
    }

    @Test
    void createCqExOnANonExtendedContextIsEopnotsupp() {
        MemorySegment plain = p.makeContext(false);
        MemorySegment attr = ibv_cq_init_attr_ex.allocate(arena);
        NativeCallException e = assertThrows(NativeCallException.class, () -> InlineVerbs.createCqEx(plain, attr));
        assertEquals("ibv_create_cq_ex", e.verb());
        assertEquals(95, e.errno());
        assertEquals("EOPNOTSUPP", e.errnoName());
        assertEquals(0, p.calls(Op.CREATE_CQ_EX), "the op must not be called");
    }

    @Test
    void createCqExWithTooSmallVerbsContextIsEopnotsupp() {
        p.setVerbsContextSz(p.context(), ContextLayout.VERBS_CONTEXT_SIZE - ContextLayout.VCTX_CREATE_CQ_EX - 1);
        MemorySegment attr = ibv_cq_init_attr_ex.allocate(arena);
        NativeCallException e =
                assertThrows(NativeCallException.class, () -> InlineVerbs.createCqEx(p.context(), attr));
        assertEquals(Errno.EOPNOTSUPP, e.errno());
        assertEquals(0, p.calls(Op.CREATE_CQ_EX));
    }

    // ---- the C baseline ---------------------------------------------------------------------

    @Test
    void cLoopPostsThroughTheInlineAndReapsEveryIteration() {
        MemorySegment buf = arena.allocate(4096, 64);
        long seen = p.cLoop(1000, 4, buf, 0x77);
        assertEquals(1000, seen);
        assertEquals(1000, p.calls(Op.POST_SEND));
        assertEquals(4000, p.wqeCount());
        assertTrue(p.calls(Op.POLL_CQ) >= 1000);
        StandInProvider.Wqe last = p.wqe(3999);
        assertEquals(3999, last.wrId());
        assertEquals(buf.address(), last.addr());
        assertEquals(64, last.length());
        assertEquals(0x77, last.lkey());
        assertEquals(ibverbs_h.IBV_SEND_SIGNALED(), last.sendFlags());
        assertEquals(0, p.wqe(3998).sendFlags());
        assertEquals(0, p.pendingCompletions());
        assertEquals(p.qp().address(), p.lastQp());
        assertEquals(p.cq().address(), p.lastCq());
    }

    @Test
    void cLoopReportsAPostFailure() {
        p.failPostAt(0, Errno.ENOMEM);
        MemorySegment buf = arena.allocate(64);
        assertEquals(-Errno.ENOMEM, p.cLoop(10, 2, buf, 1));
    }
}
