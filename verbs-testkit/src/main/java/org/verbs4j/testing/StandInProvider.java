package org.verbs4j.testing;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Test helper: the stand-in provider ({@code /c/standin_provider.c}, compiled once per JVM with
 * {@link NativeToolchain} and loaded with {@code SymbolLookup.libraryLookup}) and a set of fake
 * verbs objects it built: a {@code verbs_context}-backed {@code ibv_context} whose op slots point
 * at the stand-in functions, an RC {@code ibv_qp}, an {@code ibv_cq}, an {@code ibv_srq} and an
 * {@code ibv_pd}, and a shared {@link #arena()} for the test's own memory. The objects' sizes are
 * the stand-in's own {@code sizeof} under the installed {@code <infiniband/verbs.h>}: the kit
 * needs nothing of verbs4j, so verbs4j's native layer tests with it too.
 *
 * <p>The stand-in's state (WQE ring, completion queue, last arguments, failure modes) is global
 * to the process: use one instance at a time, from one thread. {@link #open} resets it;
 * {@link #close} frees every object this instance made, then closes its arena.
 *
 * <pre>{@code
 * try (StandInProvider p = StandInProvider.open()) {
 *     MemorySegment fn = InlineVerbs.contextOp(p.context(), ContextLayout.OPS_POST_SEND);
 *     int rc = InlineVerbs.postSend(fn, p.qp().address(), wr.address(), badWr.address());
 *     assertEquals(wr.address(), p.lastWr());
 * }
 * }</pre>
 */
public final class StandInProvider implements AutoCloseable {
    /** The class-path resource holding the stand-in's C source. */
    public static final String SOURCE_RESOURCE = "/c/standin_provider.c";
    /** The qp_num of {@link #qp()}. */
    public static final int QP_NUM = 0x4242;
    /** The qp_type of {@link #qp()} (IBV_QPT_RC). */
    public static final int QP_TYPE_RC = 2;
    /** The cqe of {@link #cq()}. */
    public static final int CQE = 256;
    /** Size of a WQE in the stand-in's ring. */
    public static final int WQE_SIZE = 64;

    /** The stand-in ops, as counted by {@link #calls(Op)}. */
    public enum Op {
        /** {@code post_send}. */
        POST_SEND,
        /** {@code post_recv}. */
        POST_RECV,
        /** {@code post_srq_recv}. */
        POST_SRQ_RECV,
        /** {@code poll_cq}. */
        POLL_CQ,
        /** {@code req_notify_cq}. */
        REQ_NOTIFY_CQ,
        /** {@code query_port}. */
        QUERY_PORT,
        /** {@code query_device_ex}. */
        QUERY_DEVICE_EX,
        /** {@code create_cq_ex}. */
        CREATE_CQ_EX
    }

    /** The extended ops whose {@code verbs_get_ctx_op} result {@link #referenceCtxOp} reports. */
    public enum ExtendedOp {
        /** {@code query_port}. */
        QUERY_PORT(0),
        /** {@code query_device_ex}. */
        QUERY_DEVICE_EX(1),
        /** {@code create_cq_ex}. */
        CREATE_CQ_EX(2);

        final int code;

        ExtendedOp(int code) {
            this.code = code;
        }
    }

    /**
     * One WQE of the ring, as post_send copied it from a work request.
     *
     * @param opcode       the IBV_WR_* opcode
     * @param imm          imm_data as stored in the WR (big-endian on the wire)
     * @param totalLength  the sum of the WR's SGE lengths
     */
    public record Wqe(
            long wrId,
            long addr,
            int length,
            int lkey,
            int opcode,
            int sendFlags,
            long remoteAddr,
            int rkey,
            int imm,
            int numSge,
            int totalLength) {}

    private static volatile Library library;

    private final Library lib;
    private final MemorySegment context;
    private final MemorySegment qp;
    private final MemorySegment cq;
    private final MemorySegment srq;
    private final MemorySegment pd;
    private final Arena arena = Arena.ofShared();
    private final boolean extended;
    private final List<MemorySegment> owned = new ArrayList<>();
    private boolean closed;

    private StandInProvider(Library lib, boolean extended) {
        this.lib = lib;
        this.extended = extended;
        lib.voidCall("standin_reset");
        this.context = makeContext(extended);
        this.qp = makeQp(context, QP_NUM, QP_TYPE_RC);
        this.cq = makeCq(context, CQE);
        this.srq = makeSrq(context);
        this.pd = makePd(context);
    }

    /** An extended ({@code verbs_context}) stand-in context with a qp, cq, srq and pd; state reset. */
    public static StandInProvider open() {
        return open(true);
    }

    /**
     * A stand-in context with a qp, cq, srq and pd; state reset. Calls
     * {@link NativeToolchain#requireToolchain()} first (fails in CI, skips elsewhere, when gcc or
     * the headers are missing).
     *
     * @param extended whether the context is a {@code verbs_context} with abi_compat = -1 (and
     *                 query_port/query_device_ex/create_cq_ex ops), else a plain one (abi_compat NULL)
     */
    public static StandInProvider open(boolean extended) {
        return new StandInProvider(library(), extended);
    }

    private static Library library() {
        Library l = library;
        if (l == null) {
            synchronized (StandInProvider.class) {
                l = library;
                if (l == null) {
                    NativeToolchain.requireToolchain();
                    Path so = NativeToolchain.compileResourceSharedLibrary(SOURCE_RESOURCE);
                    library = l = new Library(so, SymbolLookup.libraryLookup(so, Arena.global()));
                }
            }
        }
        return l;
    }

    /** The compiled stand-in library (compiled and loaded on first use). */
    public static Path libraryPath() {
        return library().path;
    }

    /** The stand-in library's symbols (e.g. {@code standin_post_send}). */
    public static SymbolLookup lookup() {
        return library().lookup;
    }

    /** The address of an exported stand-in function, e.g. {@code symbol("standin_poll_cq")}. */
    public static MemorySegment symbol(String name) {
        return library().lookup.findOrThrow(name);
    }

    /**
     * A downcall handle on {@code long long standin_c_loop(qp, cq, int iterations, int chain,
     * void *buf, uint32_t lkey)}, type {@code (long, long, int, int, long, int)long}: per
     * iteration, {@code chain} RDMA_WRITE WRs (64-byte SGE, last signaled) posted with verbs.h's
     * inline ibv_post_send and the completion reaped with ibv_poll_cq; returns the completions
     * seen (== iterations) or a negative error.
     */
    public static MethodHandle cLoopHandle() {
        return library().cLoop;
    }

    /**
     * {@code standin_c_loop_ex(qp, cq, iterations, chain, buf, lkey)}: {@link #cLoopHandle()}'s loop
     * through the extended API (ibv_wr_start, ibv_wr_rdma_write + ibv_wr_set_sge per request,
     * ibv_wr_complete) on a qp of {@link #makeExtendedQp}; same type and result.
     */
    public static MethodHandle cLoopExHandle() {
        return library().cLoopEx;
    }

    // ---- the objects -------------------------------------------------------------------

    /** Whether {@link #context()} is an extended context. */
    public boolean extended() {
        return extended;
    }

    /** The fake {@code struct ibv_context*} ({@code sizeof(struct ibv_context)} bytes). */
    public MemorySegment context() {
        return context;
    }

    /** The fake {@code struct ibv_qp*} (context set, qp_num {@link #QP_NUM}, RC, state RTS). */
    public MemorySegment qp() {
        return qp;
    }

    /** The fake {@code struct ibv_cq*} (context set, cqe {@link #CQE}). */
    public MemorySegment cq() {
        return cq;
    }

    /** The fake {@code struct ibv_srq*} (context set). */
    public MemorySegment srq() {
        return srq;
    }

    /** The fake {@code struct ibv_pd*} (context set, handle 0). */
    public MemorySegment pd() {
        return pd;
    }

    /** A shared arena for the test's buffers and hand-made structs, closed by {@link #close}. */
    public Arena arena() {
        return arena;
    }

    /** Another stand-in context (freed on close). */
    public MemorySegment makeContext(boolean extended) {
        return own(lib.ptrCall("standin_make_context", extended ? 1 : 0), lib.contextSize);
    }

    /** Another fake qp on {@code ctx} (freed on close). */
    public MemorySegment makeQp(MemorySegment ctx, int qpNum, int qpType) {
        return own(lib.ptrCall("standin_make_qp", ctx.address(), qpNum, qpType), lib.qpSize);
    }

    /**
     * An extended RC qp on {@link #context()} (an extended context) made by the stand-in's
     * create_qp_ex for {@code sendOps} ({@code IBV_QP_EX_WITH_*}), completing into {@link #cq()};
     * the caller frees it with {@link #free}.
     */
    public MemorySegment makeExtendedQp(long sendOps) {
        long q = lib.ptrCall("standin_make_qp_ex", context.address(), pd.address(), cq.address(), sendOps);
        if (q == 0) {
            throw new IllegalStateException("standin_make_qp_ex failed (is the context extended?)");
        }
        return MemorySegment.ofAddress(q).reinterpret(lib.qpSize);
    }

    /** Another fake cq on {@code ctx} (freed on close). */
    public MemorySegment makeCq(MemorySegment ctx, int cqe) {
        return own(lib.ptrCall("standin_make_cq", ctx.address(), cqe), lib.cqSize);
    }

    /** Another fake srq on {@code ctx} (freed on close). */
    public MemorySegment makeSrq(MemorySegment ctx) {
        return own(lib.ptrCall("standin_make_srq", ctx.address()), lib.srqSize);
    }

    /** Another fake pd on {@code ctx} (freed on close). */
    public MemorySegment makePd(MemorySegment ctx) {
        return own(lib.ptrCall("standin_make_pd", ctx.address()), lib.pdSize);
    }

    /**
     * Frees an object made by this instance now (or, for one it did not make, such as a
     * {@code create_cq_ex} result, hands it to {@code standin_free}).
     */
    public void free(MemorySegment object) {
        owned.removeIf(s -> s.address() == object.address());
        lib.voidCall("standin_free", object.address());
    }

    private MemorySegment own(long address, long size) {
        if (address == 0) {
            throw new IllegalStateException("the stand-in could not allocate");
        }
        MemorySegment s = MemorySegment.ofAddress(address).reinterpret(size);
        owned.add(s);
        return s;
    }

    /** Sets {@code verbs_context.sz} of a stand-in context (to test verbs_get_ctx_op's size check). */
    public void setVerbsContextSz(MemorySegment ctx, long sz) {
        lib.voidCall("standin_set_vctx_sz", ctx.address(), sz);
    }

    /** What verbs.h's own {@code verbs_get_ctx_op(ctx, op)} returns for {@code ctx} (0 for NULL). */
    public long referenceCtxOp(MemorySegment ctx, ExtendedOp op) {
        return lib.ptrCall("standin_ref_ctx_op", ctx.address(), op.code);
    }

    /** What verbs.h's own {@code verbs_get_ctx(ctx)} returns for {@code ctx} (0 for NULL). */
    public long referenceVerbsGetCtx(MemorySegment ctx) {
        return lib.ptrCall("standin_ref_ctx_op", ctx.address(), -1);
    }

    // ---- controls ----------------------------------------------------------------------

    /** Clears the ring, the queues, the counters, the last arguments and every failure mode. */
    public void reset() {
        lib.voidCall("standin_reset");
    }

    /**
     * post_send, post_recv and post_srq_recv stop at WR #{@code index} (0-based), set
     * {@code *bad_wr} to it and return {@code errno}; a negative index turns it off.
     */
    public void failPostAt(int index, int errno) {
        lib.voidCall("standin_fail_post_at", index, errno);
    }

    /** poll_cq returns {@code rc} (negative) without polling; 0 turns it off. */
    public void failPoll(int rc) {
        lib.voidCall("standin_fail_poll", rc);
    }

    /**
     * query_port, query_device_ex and req_notify_cq return {@code rc}; create_cq_ex sets errno to
     * it and returns NULL; 0 turns it off.
     */
    public void setControlRc(int rc) {
        lib.voidCall("standin_set_control_rc", rc);
    }

    /** Queues a completion (e.g. an error status) for the next poll; 0, or ENOMEM when full. */
    public int queueCompletion(long wrId, int status, int opcode, int byteLen, int qpNum) {
        return (int) lib.call("standin_queue_completion", wrId, status, opcode, byteLen, qpNum);
    }

    /**
     * Completes the oldest posted receive WR (IBV_WC_RECV, or IBV_WC_RECV_RDMA_WITH_IMM with
     * {@code imm}); returns its wr_id, or -1 when none is posted.
     */
    public long deliverRecv(int byteLen, boolean withImm, int imm) {
        return (long) lib.call("standin_deliver_recv", byteLen, withImm ? 1 : 0, imm);
    }

    // ---- what the ops saw ----------------------------------------------------------------

    /** How many times an op was called since the last reset. */
    public long calls(Op op) {
        return (long) lib.call("standin_calls", op.ordinal());
    }

    /** WQEs written since the last reset. */
    public long wqeCount() {
        return (long) lib.call("standin_wqe_count");
    }

    /** WQE #{@code index} (0-based since reset; the ring keeps the last 1024). */
    public Wqe wqe(long index) {
        MemorySegment w =
                MemorySegment.ofAddress(lib.ptrCall("standin_wqe", index)).reinterpret(WQE_SIZE);
        return new Wqe(
                w.get(JAVA_LONG, 0),
                w.get(JAVA_LONG, 8),
                w.get(JAVA_INT, 16),
                w.get(JAVA_INT, 20),
                w.get(JAVA_INT, 24),
                w.get(JAVA_INT, 28),
                w.get(JAVA_LONG, 32),
                w.get(JAVA_INT, 40),
                w.get(JAVA_INT, 44),
                w.get(JAVA_INT, 48),
                w.get(JAVA_INT, 52));
    }

    /**
     * The last 8 bytes of WQE #{@code index}: an atomic's compare (or add) operand, a bind's
     * {@code struct ibv_mw *}; 0 for other requests.
     */
    public long wqeOperand(long index) {
        return MemorySegment.ofAddress(lib.ptrCall("standin_wqe", index))
                .reinterpret(WQE_SIZE)
                .get(JAVA_LONG, 56);
    }

    /** Completions waiting to be polled. */
    public int pendingCompletions() {
        return (int) lib.call("standin_pending_completions");
    }

    /** Receive WRs posted (to a qp or the srq) and not yet delivered. */
    public int pendingRecvs() {
        return (int) lib.call("standin_pending_recvs");
    }

    /** What the stand-in recorded of the last call: qp ({@code standin_last_qp}). */
    public long lastQp() {
        return lib.ptrCall("standin_last_qp");
    }
    /** What the stand-in recorded of the last call: wr ({@code standin_last_wr}). */
    public long lastWr() {
        return lib.ptrCall("standin_last_wr");
    }
    /** What the stand-in recorded of the last call: bad wr ptr ({@code standin_last_bad_wr_ptr}). */
    public long lastBadWrPtr() {
        return lib.ptrCall("standin_last_bad_wr_ptr");
    }
    /** What the stand-in recorded of the last call: recv qp ({@code standin_last_recv_qp}). */
    public long lastRecvQp() {
        return lib.ptrCall("standin_last_recv_qp");
    }
    /** What the stand-in recorded of the last call: recv wr ({@code standin_last_recv_wr}). */
    public long lastRecvWr() {
        return lib.ptrCall("standin_last_recv_wr");
    }
    /** What the stand-in recorded of the last call: recv bad wr ptr ({@code standin_last_recv_bad_wr_ptr}). */
    public long lastRecvBadWrPtr() {
        return lib.ptrCall("standin_last_recv_bad_wr_ptr");
    }
    /** What the stand-in recorded of the last call: srq ({@code standin_last_srq}). */
    public long lastSrq() {
        return lib.ptrCall("standin_last_srq");
    }
    /** What the stand-in recorded of the last call: srq wr ({@code standin_last_srq_wr}). */
    public long lastSrqWr() {
        return lib.ptrCall("standin_last_srq_wr");
    }
    /** What the stand-in recorded of the last call: srq bad wr ptr ({@code standin_last_srq_bad_wr_ptr}). */
    public long lastSrqBadWrPtr() {
        return lib.ptrCall("standin_last_srq_bad_wr_ptr");
    }
    /** What the stand-in recorded of the last call: cq ({@code standin_last_cq}). */
    public long lastCq() {
        return lib.ptrCall("standin_last_cq");
    }
    /** What the stand-in recorded of the last call: num entries ({@code standin_last_num_entries}). */
    public int lastNumEntries() {
        return (int) lib.call("standin_last_num_entries");
    }
    /** What the stand-in recorded of the last call: wc ptr ({@code standin_last_wc_ptr}). */
    public long lastWcPtr() {
        return lib.ptrCall("standin_last_wc_ptr");
    }
    /** What the stand-in recorded of the last call: notify cq ({@code standin_last_notify_cq}). */
    public long lastNotifyCq() {
        return lib.ptrCall("standin_last_notify_cq");
    }
    /** The solicited_only argument of the last req_notify_cq (-1 after a reset). */
    public int lastSolicited() {
        return (int) lib.call("standin_last_solicited");
    }
    /** What the stand-in recorded of the last call: port ctx ({@code standin_last_port_ctx}). */
    public long lastPortCtx() {
        return lib.ptrCall("standin_last_port_ctx");
    }
    /** The port_num of the last query_port (-1 after a reset). */
    public int lastPortNum() {
        return (int) lib.call("standin_last_port_num");
    }
    /** What the stand-in recorded of the last call: port attr ptr ({@code standin_last_port_attr_ptr}). */
    public long lastPortAttrPtr() {
        return lib.ptrCall("standin_last_port_attr_ptr");
    }
    /** What the stand-in recorded of the last call: port attr size ({@code standin_last_port_attr_size}). */
    public long lastPortAttrSize() {
        return lib.ptrCall("standin_last_port_attr_size");
    }
    /** What the stand-in recorded of the last call: query device ex ctx ({@code standin_last_query_device_ex_ctx}). */
    public long lastQueryDeviceExCtx() {
        return lib.ptrCall("standin_last_query_device_ex_ctx");
    }
    /** What the stand-in recorded of the last call: query device ex input ({@code standin_last_query_device_ex_input}). */
    public long lastQueryDeviceExInput() {
        return lib.ptrCall("standin_last_query_device_ex_input");
    }
    /** What the stand-in recorded of the last call: query device ex attr ({@code standin_last_query_device_ex_attr}). */
    public long lastQueryDeviceExAttr() {
        return lib.ptrCall("standin_last_query_device_ex_attr");
    }
    /** What the stand-in recorded of the last call: query device ex attr size ({@code standin_last_query_device_ex_attr_size}). */
    public long lastQueryDeviceExAttrSize() {
        return lib.ptrCall("standin_last_query_device_ex_attr_size");
    }
    /** What the stand-in recorded of the last call: create cq ex ctx ({@code standin_last_create_cq_ex_ctx}). */
    public long lastCreateCqExCtx() {
        return lib.ptrCall("standin_last_create_cq_ex_ctx");
    }
    /** What the stand-in recorded of the last call: create cq ex attr ({@code standin_last_create_cq_ex_attr}). */
    public long lastCreateCqExAttr() {
        return lib.ptrCall("standin_last_create_cq_ex_attr");
    }

    /** The wc_flags the last {@code create_cq_ex} was asked for. */
    public long lastCreateCqExWcFlags() {
        return lib.ptrCall("standin_last_create_cq_ex_wc_flags");
    }

    /**
     * Calls of an extended CQ's {@code start_poll}/{@code next_poll}/{@code end_poll} and field
     * readers out of order since {@link #reset()} (a start inside a poll, a next, end or read
     * outside one, a NULL poll attribute): 0 when the caller keeps the protocol.
     */
    public long pollProtocolErrors() {
        return lib.ptrCall("standin_poll_protocol_errors");
    }

    /** True between a successful {@code start_poll} and its {@code end_poll}. */
    public boolean inPoll() {
        return lib.ptrCall("standin_in_poll") != 0;
    }

    /**
     * The raw completion timestamp the stand-in's extended CQ gives the {@code seq}-th completion
     * queued since {@link #reset()} (a 1 MHz clock: {@code hca_core_clock} is {@value #HCA_CORE_CLOCK_KHZ} kHz).
     */
    public long completionTimestamp(long seq) {
        return lib.ptrCall("standin_completion_ts", seq);
    }

    /** The {@code hca_core_clock} (kHz) the stand-in's query_device_ex reports. */
    public static final int HCA_CORE_CLOCK_KHZ = 1000;

    // ---- the extended QP (ibv_wr_*) and memory windows -------------------------------------------

    /**
     * Calls of an extended QP's builders and setters outside {@code wr_start} ..
     * {@code wr_complete}/{@code wr_abort}, and {@code wr_start}s inside one, since {@link #reset()}:
     * 0 when the caller keeps the protocol.
     */
    public long wrProtocolErrors() {
        return lib.ptrCall("standin_wr_protocol_errors");
    }

    /** True between {@code wr_start} and {@code wr_complete} / {@code wr_abort}. */
    public boolean inWr() {
        return (int) lib.call("standin_in_wr") != 0;
    }

    /** {@code wr_complete} calls since {@link #reset()}. */
    public long wrCompletes() {
        return lib.ptrCall("standin_wr_completes");
    }

    /** {@code wr_abort} calls since {@link #reset()}. */
    public long wrAborts() {
        return lib.ptrCall("standin_wr_aborts");
    }

    /** WQEs the {@code ibv_wr_*} builders wrote since {@link #reset()} (the others came through post_send). */
    public long wrExtendedWqes() {
        return lib.ptrCall("standin_wr_extended_wqes");
    }

    /** The inline bytes of the last inline request built through {@code wr_set_inline_data(_list)} (at most 256). */
    public byte[] lastInline() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(256);
            int n = (int) lib.call("standin_last_inline", out.address(), 256);
            return out.asSlice(0, Math.min(n, 256)).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        }
    }

    /** The swap operand of the last compare-and-swap (post_send or wr_atomic_cmp_swp). */
    public long lastSwap() {
        return lib.ptrCall("standin_last_swap");
    }

    /** The send_ops_flags the last {@code create_qp_ex} was asked for. */
    public long lastCreateQpExOps() {
        return lib.ptrCall("standin_last_create_qp_ex_ops");
    }

    /** The comp_mask of the last {@code create_qp_ex}. */
    public int lastCreateQpExMask() {
        return (int) lib.call("standin_last_create_qp_ex_mask");
    }

    /** Memory windows allocated through the stand-in's {@code alloc_mw} and not yet deallocated. */
    public int mwLive() {
        return (int) lib.call("standin_mw_live");
    }

    // ---- device memory registration (dma-buf, nvidia-peermem) ----------------------------------

    /**
     * The stand-in of a provider's {@code reg_dmabuf_mr}: a fake {@code struct ibv_mr *} (address
     * {@code iova}, keys 0x7000+n / 0x9000+n), or 0 with {@link #lastDeviceRegErrno()} saying why
     * (EBADF for a closed fd, or what {@link #setDeviceRegErrno} chose).
     */
    public long regDmabufMr(long pd, long offset, long length, long iova, int fd, int access) {
        return lib.ptrCall("standin_reg_dmabuf_mr", pd, offset, length, iova, fd, access);
    }

    /** The stand-in of {@code ibv_reg_mr} on a device pointer (nvidia-peermem): a fake MR, or 0. */
    public long regDeviceMr(long pd, long address, long length, int access) {
        return lib.ptrCall("standin_reg_device_mr", pd, address, length, access);
    }

    /** Deregisters (frees) a fake MR of {@link #regDmabufMr} or {@link #regDeviceMr}. */
    public void deregDeviceMr(long mr) {
        lib.call("standin_dereg_device_mr", mr);
    }

    /** What the next registrations answer: 0 accepts, else that errno (dma-buf, device pointer). */
    public void setDeviceRegErrno(int dmaBuf, int devicePointer) {
        lib.voidCall("standin_set_device_reg_errno", dmaBuf, devicePointer);
    }

    /** The errno of the last refused device-memory registration. */
    public int lastDeviceRegErrno() {
        return (int) lib.call("standin_last_device_reg_errno");
    }

    /** Fake device MRs registered and not yet deregistered (process-wide, never reset). */
    public int deviceMrLive() {
        return (int) lib.call("standin_device_mr_live");
    }

    /** 1 when the last deregistered dma-buf MR's fd was still open, 0 when it was closed, -1 before any. */
    public int dmaBufFdOpenAtDereg() {
        return (int) lib.call("standin_dmabuf_fd_open_at_dereg");
    }

    // ---- on-demand paging ------------------------------------------------------------------

    /** What {@code query_device_ex} reports as {@code odp_caps.general_caps} (0, the default: no ODP). */
    public void setOdpCaps(long generalCaps) {
        lib.voidCall("standin_set_odp_caps", generalCaps);
    }

    /**
     * The stand-in of a provider's {@code reg_mr} with {@code IBV_ACCESS_ON_DEMAND}: a fake MR
     * (keys 0x0d00+n / 0x0e00+n), or 0 (EOPNOTSUPP unless {@link #setOdpCaps} offers it, EINVAL
     * without ON_DEMAND).
     */
    public long regOdpMr(long pd, long address, long length, int access) {
        return lib.ptrCall("standin_reg_odp_mr", pd, address, length, access);
    }

    /** Deregisters (frees) a fake MR of {@link #regOdpMr}. */
    public void deregOdpMr(long mr) {
        lib.call("standin_dereg_odp_mr", mr);
    }

    /** Fake on-demand MRs registered and not yet deregistered. */
    public int odpMrLive() {
        return (int) lib.call("standin_odp_mr_live");
    }

    /** The access flags, address and length of the last accepted {@link #regOdpMr}. */
    public long[] lastOdpRegistration() {
        return new long[] {
            (int) lib.call("standin_last_odp_access"),
            lib.ptrCall("standin_last_odp_addr"),
            lib.ptrCall("standin_last_odp_length")
        };
    }

    /** What the stand-in's alloc_td and alloc_parent_domain answer: 0 (the default) accepts, else that errno. */
    public void setDomainErrno(int errno) {
        lib.voidCall("standin_set_domain_errno", errno);
    }

    /** Thread domains of the stand-in's alloc_td not yet deallocated. */
    public int threadDomainsLive() {
        return (int) lib.call("standin_td_live");
    }

    /** Parent domains of the stand-in's alloc_parent_domain not yet deallocated. */
    public int parentDomainsLive() {
        return (int) lib.call("standin_parent_domain_live");
    }

    /** The {@code pd} and {@code td} of the last accepted alloc_parent_domain. */
    public long[] lastParentDomain() {
        return new long[] {lib.ptrCall("standin_last_parent_pd"), lib.ptrCall("standin_last_parent_td")};
    }

    /** What {@code ibv_dealloc_pd} does with a parent domain of the stand-in (releases its thread domain). */
    public void deallocParentDomain(long pd) {
        lib.call("standin_dealloc_parent_domain", pd);
    }

    /** The {@code parent_domain} of the last create_cq_ex (0 without {@code IBV_CQ_INIT_ATTR_MASK_PD}). */
    public long lastCreateCqExParent() {
        return lib.ptrCall("standin_last_create_cq_ex_parent");
    }

    /** open_xrcd and create_srq_ex refuse with {@code errno} (0: accept). */
    public void setXrcErrno(int errno) {
        lib.voidCall("standin_set_xrc_errno", errno);
    }

    /** XRC domains of the stand-in's open_xrcd not yet closed. */
    public int xrcDomainsLive() {
        return (int) lib.call("standin_xrcd_live");
    }

    /** XRC SRQs of the stand-in's create_srq_ex not yet destroyed. */
    public int xrcSrqsLive() {
        return (int) lib.call("standin_xrc_srq_live");
    }

    /** The {@code comp_mask}, {@code fd} and {@code oflags} of the last open_xrcd. */
    public int[] lastOpenXrcd() {
        return new int[] {
            (int) lib.call("standin_last_xrcd", 0),
            (int) lib.call("standin_last_xrcd", 1),
            (int) lib.call("standin_last_xrcd", 2)
        };
    }

    /** The {@code pd}, {@code xrcd}, {@code cq} and {@code max_wr} of the last accepted XRC create_srq_ex. */
    public long[] lastXrcSrq() {
        return new long[] {
            lib.ptrCall("standin_last_xrc_srq", 0),
            lib.ptrCall("standin_last_xrc_srq", 1),
            lib.ptrCall("standin_last_xrc_srq", 2),
            lib.ptrCall("standin_last_xrc_srq", 3)
        };
    }

    /** The {@code qp_type}, {@code xrcd} (with IBV_QP_INIT_ATTR_XRCD) and {@code recv_cq} of the last create_qp_ex. */
    public long[] lastCreateQpEx() {
        return new long[] {
            lib.ptrCall("standin_last_create_qp_ex", 0),
            lib.ptrCall("standin_last_create_qp_ex", 1),
            lib.ptrCall("standin_last_create_qp_ex", 2)
        };
    }

    /** The {@code comp_mask}, {@code qp_num} and {@code xrcd} of the last open_qp. */
    public long[] lastOpenQp() {
        return new long[] {
            lib.ptrCall("standin_last_open_qp", 0),
            lib.ptrCall("standin_last_open_qp", 1),
            lib.ptrCall("standin_last_open_qp", 2)
        };
    }

    /** What {@code ibv_destroy_srq} does with an XRC SRQ of the stand-in (releases its domain). */
    public void destroyXrcSrq(long srq) {
        lib.call("standin_destroy_xrc_srq", srq);
    }

    /** What {@code ibv_destroy_qp} does with a queue pair of the stand-in's create_qp_ex (an XRC_RECV one releases its domain). */
    public void destroyQpEx(long qp) {
        lib.call("standin_destroy_qp_ex", qp);
    }

    /** What {@code query_device_ex} reports as {@code max_dm_size} (64 KiB after reset; 0: no device memory). */
    public void setMaxDmSize(long size) {
        lib.voidCall("standin_set_max_dm_size", size);
    }

    /** Device memory of the stand-in's alloc_dm not yet freed. */
    public int deviceMemoryLive() {
        return (int) lib.call("standin_dm_live");
    }

    /** Regions of the stand-in's reg_dm_mr not yet deregistered. */
    public int deviceMemoryRegionsLive() {
        return (int) lib.call("standin_dm_mr_live");
    }

    /** Calls of the stand-in's memcpy_to_dm and memcpy_from_dm since reset. */
    public int deviceMemoryCopies() {
        return (int) lib.call("standin_dm_copies");
    }

    /** The dm_offset, length and access flags of the last accepted reg_dm_mr. */
    public long[] lastDeviceMemoryRegistration() {
        return new long[] {
            lib.ptrCall("standin_last_dm_mr", 0),
            lib.ptrCall("standin_last_dm_mr", 1),
            lib.ptrCall("standin_last_dm_mr", 2)
        };
    }

    /** What {@code ibv_dereg_mr} does with a region of the stand-in's reg_dm_mr. */
    public void deregDeviceMemoryRegion(long mr) {
        lib.call("standin_dereg_dm_mr", mr);
    }

    /** Calls of the stand-in's {@code advise_mr} since reset. */
    public int adviseCalls() {
        return (int) lib.call("standin_advise_calls");
    }

    /** The advice, flags and SGE count of the last accepted {@code advise_mr}. */
    public int[] lastAdvice() {
        return new int[] {
            (int) lib.call("standin_last_advice"),
            (int) lib.call("standin_last_advise_flags"),
            (int) lib.call("standin_last_advise_num_sge")
        };
    }

    /** SGE {@code i} of the last accepted {@code advise_mr}: its addr, length and lkey. */
    public long[] lastAdviseSge(int i) {
        return new long[] {
            lib.ptrCall("standin_last_advise_sge", i, 0),
            lib.ptrCall("standin_last_advise_sge", i, 1),
            lib.ptrCall("standin_last_advise_sge", i, 2)
        };
    }

    /** Runs the C baseline loop ({@link #cLoopHandle()}) on this instance's qp and cq. */
    public long cLoop(int iterations, int chain, MemorySegment buf, int lkey) {
        try {
            return (long) lib.cLoop.invokeExact(qp.address(), cq.address(), iterations, chain, buf.address(), lkey);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Frees every object this instance made, then closes its arena. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        // objects first, contexts last (a context must outlive its objects' users)
        List<MemorySegment> rest = new ArrayList<>(owned);
        owned.clear();
        for (int i = rest.size() - 1; i >= 0; i--) {
            lib.voidCall("standin_free", rest.get(i).address());
        }
        arena.close();
    }

    // ---- the library ------------------------------------------------------------------------

    private static final class Library {
        final Path path;
        final SymbolLookup lookup;
        final MethodHandle cLoop;
        final MethodHandle cLoopEx;
        final long contextSize;
        final long qpSize;
        final long cqSize;
        final long srqSize;
        final long pdSize;
        private final Map<String, MethodHandle> handles = new ConcurrentHashMap<>();

        Library(Path path, SymbolLookup lookup) {
            this.path = path;
            this.lookup = lookup;
            this.cLoop = Linker.nativeLinker()
                    .downcallHandle(
                            lookup.findOrThrow("standin_c_loop"),
                            FunctionDescriptor.of(
                                    JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT));
            this.cLoopEx = Linker.nativeLinker()
                    .downcallHandle(
                            lookup.findOrThrow("standin_c_loop_ex"),
                            FunctionDescriptor.of(
                                    JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_INT));
            this.contextSize = ptrCall("standin_sizeof", 0);
            this.qpSize = ptrCall("standin_sizeof", 1);
            this.cqSize = ptrCall("standin_sizeof", 2);
            this.srqSize = ptrCall("standin_sizeof", 3);
            this.pdSize = ptrCall("standin_sizeof", 4);
        }

        private static final Map<String, FunctionDescriptor> SIGNATURES = Map.ofEntries(
                Map.entry("standin_reset", FunctionDescriptor.ofVoid()),
                Map.entry("standin_fail_post_at", FunctionDescriptor.ofVoid(JAVA_INT, JAVA_INT)),
                Map.entry("standin_fail_poll", FunctionDescriptor.ofVoid(JAVA_INT)),
                Map.entry("standin_set_control_rc", FunctionDescriptor.ofVoid(JAVA_INT)),
                Map.entry("standin_calls", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_wqe_count", FunctionDescriptor.of(JAVA_LONG)),
                Map.entry("standin_wqe", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_pending_completions", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_pending_recvs", FunctionDescriptor.of(JAVA_INT)),
                Map.entry(
                        "standin_queue_completion",
                        FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT)),
                Map.entry("standin_deliver_recv", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT)),
                Map.entry("standin_last_num_entries", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_solicited", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_port_num", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_make_context", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_make_qp", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT)),
                Map.entry("standin_make_cq", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT)),
                Map.entry("standin_make_srq", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_make_pd", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_sizeof", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_free", FunctionDescriptor.ofVoid(JAVA_LONG)),
                Map.entry("standin_set_vctx_sz", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_ref_ctx_op", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_INT)),
                Map.entry(
                        "standin_reg_dmabuf_mr",
                        FunctionDescriptor.of(
                                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT)),
                Map.entry(
                        "standin_reg_device_mr",
                        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT)),
                Map.entry("standin_dereg_device_mr", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_set_device_reg_errno", FunctionDescriptor.ofVoid(JAVA_INT, JAVA_INT)),
                Map.entry("standin_device_mr_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_device_reg_errno", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_dmabuf_fd_open_at_dereg", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_completion_ts", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_in_wr", FunctionDescriptor.of(JAVA_INT)),
                Map.entry(
                        "standin_make_qp_ex",
                        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG)),
                Map.entry("standin_mw_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_set_odp_caps", FunctionDescriptor.ofVoid(JAVA_LONG)),
                Map.entry(
                        "standin_reg_odp_mr",
                        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT)),
                Map.entry("standin_dereg_odp_mr", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_odp_mr_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_odp_access", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_advise_calls", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_advice", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_advise_flags", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_advise_num_sge", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_advise_sge", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_INT)),
                Map.entry("standin_last_create_qp_ex_mask", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_set_domain_errno", FunctionDescriptor.ofVoid(JAVA_INT)),
                Map.entry("standin_set_max_dm_size", FunctionDescriptor.ofVoid(JAVA_LONG)),
                Map.entry("standin_dm_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_dm_mr_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_dm_copies", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_dm_mr", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_dereg_dm_mr", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_td_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_parent_domain_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_dealloc_parent_domain", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_set_xrc_errno", FunctionDescriptor.ofVoid(JAVA_INT)),
                Map.entry("standin_xrcd_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_xrc_srq_live", FunctionDescriptor.of(JAVA_INT)),
                Map.entry("standin_last_xrcd", FunctionDescriptor.of(JAVA_INT, JAVA_INT)),
                Map.entry("standin_last_xrc_srq", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_last_create_qp_ex", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_last_open_qp", FunctionDescriptor.of(JAVA_LONG, JAVA_INT)),
                Map.entry("standin_destroy_xrc_srq", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_destroy_qp_ex", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)),
                Map.entry("standin_last_inline", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT)));

        private MethodHandle handle(String name) {
            return handles.computeIfAbsent(name, n -> {
                FunctionDescriptor fd = SIGNATURES.getOrDefault(n, FunctionDescriptor.of(JAVA_LONG));
                return Linker.nativeLinker().downcallHandle(lookup.findOrThrow(n), fd);
            });
        }

        Object call(String name, Object... args) {
            try {
                return handle(name).invokeWithArguments(args);
            } catch (Throwable t) {
                throw new IllegalStateException("calling " + name, t);
            }
        }

        void voidCall(String name, Object... args) {
            call(name, args);
        }

        /** For functions returning a pointer or size_t (as a long). */
        long ptrCall(String name, Object... args) {
            return (long) call(name, args);
        }
    }
}
