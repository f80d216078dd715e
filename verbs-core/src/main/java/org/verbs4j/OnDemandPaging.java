package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ExtendedPostVerbs;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr_ex;
import org.verbs4j.natives.generated.ibverbs.ibv_odp_caps;
import org.verbs4j.natives.generated.ibverbs.ibv_sge;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;

/**
 * On-demand paging: the capability checks of {@link ProtectionDomain#registerOnDemand} and
 * {@link ProtectionDomain#registerImplicitOnDemand} (the device's {@code odp_caps}, read with
 * {@code ibv_query_device_ex}), and {@code ibv_advise_mr} for {@link MemoryRegion#advise}.
 * Stateless; control path.
 */
final class OnDemandPaging {
    private OnDemandPaging() {}

    static final String NO_ODP = "device attribute odp_caps.general_caps has no IBV_ODP_SUPPORT";
    static final String NO_IMPLICIT = "device attribute odp_caps.general_caps has no IBV_ODP_SUPPORT_IMPLICIT";

    /** {@code ibv_advise_mr} takes SGEs of 32-bit lengths: a range is advised in pieces of this many bytes. */
    static final long PIECE = 1L << 30;

    /** {@code IBV_ADVISE_MR_FLAG_FLUSH}: return once the pages are in (synchronous). */
    static final int FLAG_FLUSH = 1;

    /** {@code enum ibv_advise_mr_advice}: {@code IBV_ADVISE_MR_ADVICE_PREFETCH(_WRITE, _NO_FAULT)}. */
    static final int ADVICE_PREFETCH = 0, ADVICE_PREFETCH_WRITE = 1, ADVICE_PREFETCH_NO_FAULT = 2;

    /** {@code odp_caps.general_caps} of the device, or -1 with {@code why[0]} set when it cannot be read. */
    private static long generalCaps(Context ctx, String[] why) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ex = Capabilities.deviceAttributesEx(ctx, a);
            return ibv_odp_caps.general_caps(ibv_device_attr_ex.odp_caps(ex));
        } catch (VerbsException e) {
            why[0] = "its odp_caps could not be read (" + e.getMessage() + ")";
            return -1;
        }
    }

    /**
     * Refuses (EOPNOTSUPP, naming the missing capability) an on-demand registration ({@code implicit}:
     * of the whole address space) on a device whose {@code odp_caps} do not offer it.
     */
    static void require(Context ctx, String verb, boolean implicit) {
        String[] why = {null};
        long caps = generalCaps(ctx, why);
        if (caps >= 0 && (caps & ibverbs_h.IBV_ODP_SUPPORT()) == 0) {
            why[0] = NO_ODP;
        } else if (caps >= 0 && implicit && (caps & ibverbs_h.IBV_ODP_SUPPORT_IMPLICIT()) == 0) {
            why[0] = NO_IMPLICIT;
        }
        if (why[0] != null) {
            throw VerbsException.create(
                    verb,
                    Errno.EOPNOTSUPP,
                    ctx.deviceName() + " offers no " + (implicit ? "implicit " : "") + "on-demand paging: " + why[0],
                    implicit
                            ? "register the buffers themselves (registerOnDemand, or register without ON_DEMAND)"
                            : "register the memory pinned (register or allocateMemoryRegion, without "
                                    + "Access.ON_DEMAND), or use a device whose driver implements ODP (e.g. mlx5)");
        }
    }

    /**
     * {@code ibv_advise_mr(pd, advice, flags, sge)} over {@code [address, address + length)} of
     * {@code mr} (its lkey), in pieces of at most {@link #PIECE} bytes; throws the provider's errno.
     */
    static void advise(MemoryRegion mr, int advice, int flags, long address, long length) {
        String verb = "ibv_advise_mr";
        ProtectionDomain pd = mr.protectionDomain();
        MemorySegment ctx = pd.context().handle;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment sge = a.allocate(ibv_sge.layout());
            for (long done = 0; done < length; done += PIECE) {
                long n = Math.min(PIECE, length - done);
                ibv_sge.addr(sge, address + done);
                ibv_sge.length(sge, (int) n);
                ibv_sge.lkey(sge, mr.lkey());
                int rc = ExtendedPostVerbs.adviseMr(ctx, pd.handle, advice, flags, sge, 1);
                if (rc != 0) {
                    throw VerbsException.create(
                            verb,
                            rc,
                            rc == Errno.EOPNOTSUPP
                                    ? "the provider of " + pd.context().deviceName() + " has no advise_mr op"
                                    : "the provider refused the advice for [0x" + Long.toHexString(address + done)
                                            + ", +" + n + ") of " + mr.describe(),
                            rc == Errno.EOPNOTSUPP
                                    ? "skip the prefetch: the device faults the pages in as it touches them"
                                    : "advise a range inside the region, with an advice its rights allow");
                }
            }
        }
    }
}
