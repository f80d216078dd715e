package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import org.verbs4j.CapabilityReport.Feature;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr_ex;
import org.verbs4j.natives.generated.ibverbs.ibv_odp_caps;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;
import org.verbs4j.natives.generated.ibverbs.verbs_context;

/** Builds a {@link CapabilityReport} for {@link Context#capabilities()}. Stateless. */
final class Capabilities {
    private Capabilities() {}

    /**
     * {@code device_cap_flags_ex} bits of the kernel's uAPI ({@code IB_UVERBS_DEVICE_*} of
     * {@code rdma/ib_user_verbs.h}; libibverbs passes them through without names).
     */
    static final long DEVICE_FLUSH_GLOBAL = 1L << 38,
            DEVICE_FLUSH_PERSISTENT = 1L << 39,
            DEVICE_ATOMIC_WRITE = 1L << 40;

    static final String NO_ATOMIC_WRITE =
            "device attribute device_cap_flags_ex lacks IB_UVERBS_DEVICE_ATOMIC_WRITE (rxe has it from Linux 6.2)";

    /** The inline sizes the probe tries, largest first. */
    private static final int[] INLINE_PROBES = {1024, 512, 256, 128, 64, 32};

    static CapabilityReport of(Context ctx) {
        DeviceAttributes d = ctx.queryDevice();
        List<Feature> f = new ArrayList<>();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ex = deviceAttributesEx(ctx, a);
            MemorySegment orig = ibv_device_attr_ex.orig_attr(ex);
            long capsEx = ibv_device_attr_ex.device_cap_flags_ex(ex);
            f.add(
                    d.atomicCap() != DeviceAttributes.ATOMIC_NONE
                            ? Feature.yes(
                                    "atomics", "atomic_cap " + d.atomicCap() + ", max_qp_rd_atom " + d.maxQpRdAtom())
                            : Feature.no("atomics", "device attribute atomic_cap is IBV_ATOMIC_NONE"));
            f.add(
                    d.maxSrq() > 0
                            ? Feature.yes("srq", "max_srq " + d.maxSrq() + ", max_srq_wr " + d.maxSrqWr())
                            : Feature.no("srq", "device attribute max_srq is 0"));
            f.add(inline(ctx));
            f.add(extendedCq(ctx));
            long tsMask = ibv_device_attr_ex.completion_timestamp_mask(ex);
            f.add(
                    tsMask != 0
                            ? Feature.yes(
                                    "completion timestamps",
                                    "completion_timestamp_mask 0x" + Long.toHexString(tsMask) + ", hca_core_clock "
                                            + ibv_device_attr_ex.hca_core_clock(ex) + " kHz")
                            : Feature.no("completion timestamps", "device attribute completion_timestamp_mask is 0"));
            f.add(op(ctx, "extended QP", verbs_context.create_qp_ex$offset(), "create_qp_ex", "op present"));
            MemorySegment odp = ibv_device_attr_ex.odp_caps(ex);
            long odpGeneral = ibv_odp_caps.general_caps(odp);
            f.add(
                    (odpGeneral & ibverbs_h.IBV_ODP_SUPPORT()) != 0
                            ? Feature.yes(
                                    "odp",
                                    "general_caps 0x" + Long.toHexString(odpGeneral) + ", rc_odp_caps 0x"
                                            + Integer.toHexString(ibv_odp_caps.per_transport_caps.rc_odp_caps(
                                                    ibv_odp_caps.per_transport_caps(odp))))
                            : Feature.no("odp", OnDemandPaging.NO_ODP));
            f.add(
                    (odpGeneral & ibverbs_h.IBV_ODP_SUPPORT_IMPLICIT()) != 0
                            ? Feature.yes("implicit odp", "general_caps has IBV_ODP_SUPPORT_IMPLICIT")
                            : Feature.no("implicit odp", OnDemandPaging.NO_IMPLICIT));
            f.add(memoryWindows(ctx, d));
            f.add(xrc(ctx, (ibv_device_attr.device_cap_flags(orig) & ibverbs_h.IBV_DEVICE_XRC()) != 0));
            long dm = ibv_device_attr_ex.max_dm_size(ex);
            f.add(
                    dm == 0
                            ? Feature.no("device memory", DeviceMemory.NO_DM)
                            : op(
                                    ctx,
                                    "device memory",
                                    verbs_context.alloc_dm$offset(),
                                    "alloc_dm",
                                    "max_dm_size " + dm));
            int mcast = ibv_device_attr.max_mcast_grp(orig);
            f.add(
                    mcast > 0
                            ? Feature.yes(
                                    "multicast",
                                    "max_mcast_grp " + mcast + ", max_mcast_qp_attach "
                                            + ibv_device_attr.max_mcast_qp_attach(orig))
                            : Feature.no("multicast", "device attribute max_mcast_grp is 0"));
            f.add(atomicWrite(ctx, capsEx));
            f.add(flush(capsEx));
            f.add(threadDomains(ctx));
            f.add(dmaBuf(ctx));
            f.add(Feature.yes("device_cap_flags_ex", "0x" + Long.toHexString(capsEx)));
        }
        List<CapabilityReport.Port> ports = new ArrayList<>();
        for (int p = 1; p <= d.physPortCount(); p++) {
            PortAttributes pa = ctx.queryPort(p);
            List<Feature> pf = new ArrayList<>();
            pf.add(Feature.yes("link layer", String.valueOf(pa.linkLayer())));
            pf.add(Feature.yes("mtu", "active " + pa.activeMtu() + ", max " + pa.maxMtu()));
            pf.add(Feature.yes("gid table", pa.gidTableLength() + " entries"));
            int port = p;
            pf.add(ctx.firstRoceV2Ipv4Gid(p)
                    .map(g -> Feature.yes("roce v2 ipv4 gid", "index " + g.index()))
                    .orElseGet(
                            () -> Feature.no("roce v2 ipv4 gid", "no RoCE v2 IPv4 GID in port " + port + "'s table")));
            ports.add(new CapabilityReport.Port(p, pa.stateText(), pf));
        }
        return new CapabilityReport(ctx.deviceName(), ctx.providerName().orElse(""), f, ports);
    }

    /** {@code ibv_query_device_ex} of {@code ctx} into a {@code struct ibv_device_attr_ex} of {@code a}. */
    static MemorySegment deviceAttributesEx(Context ctx, Arena a) {
        MemorySegment ex = a.allocate(ibv_device_attr_ex.layout());
        ctx.pin("ibv_query_device_ex");
        try {
            InlineVerbs.queryDeviceEx(ctx.handle, ex, ibv_device_attr_ex.sizeof());
        } finally {
            ctx.unpin();
        }
        return ex;
    }

    /** The device's {@code device_cap_flags_ex}. */
    static long capFlagsEx(Context ctx) {
        try (Arena a = Arena.ofConfined()) {
            return ibv_device_attr_ex.device_cap_flags_ex(deviceAttributesEx(ctx, a));
        }
    }

    /** Probed where the device has the bit: an extended RC queue pair created for ATOMIC_WRITE. */
    private static Feature atomicWrite(Context ctx, long capsEx) {
        if ((capsEx & DEVICE_ATOMIC_WRITE) == 0) {
            return Feature.no("atomic write", NO_ATOMIC_WRITE);
        }
        try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(1);
                QueuePair qp = pd.createExtendedQueuePair(
                        QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(1).maxRecvWr(1),
                        EnumSet.of(SendOperation.ATOMIC_WRITE))) {
            return (qp.extended.opcodes & 1 << SendWorkRequests.OP_ATOMIC_WRITE) != 0
                    ? Feature.yes(
                            "atomic write",
                            "IB_UVERBS_DEVICE_ATOMIC_WRITE; ibv_create_qp_ex probed: wr_atomic_write set")
                    : Feature.no("atomic write", "ibv_create_qp_ex probe: the provider left wr_atomic_write NULL");
        } catch (VerbsException e) {
            return Feature.no("atomic write", "ibv_create_qp_ex probe: " + e.getMessage());
        }
    }

    /** The device's flush bits; verbs4j cannot post a flush (no wr_flush in rdma-core 44's struct ibv_qp_ex). */
    private static Feature flush(long capsEx) {
        String has = ((capsEx & DEVICE_FLUSH_GLOBAL) != 0 ? " IB_UVERBS_DEVICE_FLUSH_GLOBAL" : "")
                + ((capsEx & DEVICE_FLUSH_PERSISTENT) != 0 ? " IB_UVERBS_DEVICE_FLUSH_PERSISTENT" : "");
        return Feature.no(
                "flush",
                has.isEmpty()
                        ? "device attribute device_cap_flags_ex lacks IB_UVERBS_DEVICE_FLUSH_GLOBAL and"
                                + " _PERSISTENT (rxe has them from Linux 6.2)"
                        : "the device has" + has + ", but verbs4j binds rdma-core 44, whose ibv_qp_ex has"
                                + " no wr_flush (rdma-core 45 added ibv_wr_flush)");
    }

    /** The device's {@code max_dm_size} (0: no device memory). */
    static long maxDmSize(Context ctx) {
        try (Arena a = Arena.ofConfined()) {
            return ibv_device_attr_ex.max_dm_size(deviceAttributesEx(ctx, a));
        }
    }

    private static Feature op(Context ctx, String name, long vctxOffset, String opName, String yes) {
        ctx.pin("verbs_get_ctx_op");
        try {
            return InlineVerbs.verbsGetCtxOp(ctx.handle, vctxOffset).equals(MemorySegment.NULL)
                    ? Feature.no(name, "the provider has no " + opName + " op")
                    : Feature.yes(name, yes + " (" + opName + ")");
        } finally {
            ctx.unpin();
        }
    }

    private static Feature memoryWindows(Context ctx, DeviceAttributes d) {
        if (d.maxMw() == 0) {
            return Feature.no("memory windows", "device attribute max_mw is 0");
        }
        ctx.pin("ibv_alloc_mw");
        try {
            if (InlineVerbs.contextOp(ctx.handle, org.verbs4j.natives.ContextLayout.OPS_ALLOC_MW)
                    .equals(MemorySegment.NULL)) {
                return Feature.no("memory windows", "the provider has no alloc_mw op");
            }
        } finally {
            ctx.unpin();
        }
        int flags = d.deviceCapFlags();
        return Feature.yes(
                "memory windows",
                "max_mw " + d.maxMw() + ", type 2A " + ((flags & ibverbs_h.IBV_DEVICE_MEM_WINDOW_TYPE_2A()) != 0)
                        + ", type 2B " + ((flags & ibverbs_h.IBV_DEVICE_MEM_WINDOW_TYPE_2B()) != 0));
    }

    private static Feature extendedCq(Context ctx) {
        try (CompletionQueueEx cq =
                ctx.createExtendedCompletionQueue(1, EnumSet.noneOf(CompletionField.class), null, 0)) {
            return Feature.yes("extended CQ", "ibv_create_cq_ex probed: " + cq.capacity() + " entries granted");
        } catch (VerbsException e) {
            return Feature.no("extended CQ", "ibv_create_cq_ex probe: " + e.getMessage());
        }
    }

    private static Feature inline(Context ctx) {
        VerbsException last = null;
        try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(1)) {
            for (int size : INLINE_PROBES) {
                QueuePair qp = null;
                try {
                    qp = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq)
                            .maxSendWr(1)
                            .maxRecvWr(1)
                            .maxInlineData(size));
                    return Feature.yes("inline data", "max_inline_data " + size + " (probed with an RC QP)");
                } catch (VerbsException e) {
                    last = e;
                } finally {
                    if (qp != null) {
                        qp.close();
                    }
                }
            }
        } catch (VerbsException e) {
            last = e;
        }
        return Feature.no(
                "inline data", "no RC QP with 32 or more bytes inline: " + (last == null ? "" : last.getMessage()));
    }

    /** Whether {@code ibv_query_device_ex} of {@code ctx} has IBV_DEVICE_XRC in device_cap_flags (false when it cannot say). */
    static boolean hasXrcFlag(Context ctx) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment orig = ibv_device_attr_ex.orig_attr(deviceAttributesEx(ctx, a));
            return (ibv_device_attr.device_cap_flags(orig) & ibverbs_h.IBV_DEVICE_XRC()) != 0;
        } catch (VerbsException e) {
            return false;
        }
    }

    /** Probed: an anonymous XRC domain opened and closed ({@code ibv_open_xrcd}), or the errno of the refusal. */
    private static Feature xrc(Context ctx, boolean flag) {
        String flagText = flag ? "IBV_DEVICE_XRC" : XrcDomain.NO_XRC;
        try {
            ctx.openXrcDomain().close();
            return Feature.yes("xrc", flagText + "; ibv_open_xrcd probed: a domain opened and closed");
        } catch (VerbsException e) {
            return Feature.no("xrc", flagText + "; ibv_open_xrcd probe: " + Errno.name(e.errno()));
        }
    }

    /** Probed: a thread domain allocated and released ({@code ibv_alloc_td}), or the errno of the refusal. */
    private static Feature threadDomains(Context ctx) {
        try {
            ctx.allocateThreadDomain().close();
            return Feature.yes("thread domains", "ibv_alloc_td probed: a thread domain allocated and released");
        } catch (VerbsException e) {
            return Feature.no(
                    "thread domains",
                    "ibv_alloc_td probe: " + Errno.name(e.errno())
                            + (e.errno() == Errno.EOPNOTSUPP ? ", " + ThreadDomain.NO_TD : ": " + e.getMessage()));
        }
    }

    private static Feature dmaBuf(Context ctx) {
        try (ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            DmaBufSupport s = pd.probeDmaBuf();
            return new Feature("dma-buf", s.supported(), s.verdict() + ": " + s.reason());
        }
    }
}
