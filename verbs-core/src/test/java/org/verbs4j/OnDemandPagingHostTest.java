package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;

/**
 * Host tier: on-demand paging over the stand-in provider, whose query_device_ex reports the ODP
 * caps a test sets, whose reg_mr stand-in registers with ON_DEMAND (explicit and implicit) and
 * whose verbs_context.advise_mr records its arguments. The successful paths reach the provider
 * with the access bits, the whole-address-space range and the SGEs of the advice; the refusals
 * (a device without the capability, advice on a pinned region, a range outside) reach nothing.
 */
class OnDemandPagingHostTest extends StandInHostTest {
    private static final Set<Access> WRITE = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE);
    private static final long ODP = ibverbs_h.IBV_ODP_SUPPORT();
    private static final long IMPLICIT = ibverbs_h.IBV_ODP_SUPPORT_IMPLICIT();

    private MemoryRegion onDemand(MemorySegment memory, Set<Access> access) {
        return o.pd.registerOnDemand(memory, access, this::register, h -> p.deregOdpMr(h.address()));
    }

    private MemoryRegion implicit(Set<Access> access) {
        return o.pd.registerImplicitOnDemand(access, this::register, h -> p.deregOdpMr(h.address()));
    }

    private MemorySegment register(MemorySegment pd, long address, long length, int access) {
        long mr = p.regOdpMr(pd.address(), address, length, access);
        assertTrue(mr != 0, "the stand-in refused the ODP registration");
        return MemorySegment.ofAddress(mr);
    }

    @Test
    void anOnDemandRegionReachesTheProviderWithOnDemandAndIsAdvised() {
        p.setOdpCaps(ODP);
        int live = p.odpMrLive();
        MemorySegment memory = Arena.ofAuto().allocate(1 << 16, 4096);
        MemoryRegion mr = onDemand(memory, WRITE);
        try {
            assertEquals(live + 1, p.odpMrLive());
            long[] reg = p.lastOdpRegistration();
            assertEquals(Access.mask(WRITE) | Access.ON_DEMAND.bit(), (int) reg[0], "IBV_ACCESS_ON_DEMAND added");
            assertEquals(memory.address(), reg[1]);
            assertEquals(memory.byteSize(), reg[2]);
            assertTrue(mr.access().contains(Access.ON_DEMAND));
            assertTrue(mr.isHostAccessible());
            mr.prefetch(4096, 8192);
            assertEquals(1, p.adviseCalls());
            assertArrayEquals(
                    new int[] {MemoryRegion.Advice.PREFETCH_WRITE.value, OnDemandPaging.FLAG_FLUSH, 1}, p.lastAdvice());
            assertArrayEquals(new long[] {memory.address() + 4096, 8192, mr.lkey()}, p.lastAdviseSge(0));
            mr.advise(MemoryRegion.Advice.PREFETCH_NO_FAULT, 0, 100, false);
            assertArrayEquals(new int[] {MemoryRegion.Advice.PREFETCH_NO_FAULT.value, 0, 1}, p.lastAdvice());
        } finally {
            mr.close();
        }
        assertEquals(live, p.odpMrLive());
    }

    @Test
    void implicitOnDemandCoversTheWholeAddressSpace() {
        p.setOdpCaps(ODP | IMPLICIT);
        MemoryRegion mr = implicit(WRITE);
        try {
            long[] reg = p.lastOdpRegistration();
            assertEquals(0, reg[1], "address NULL");
            assertEquals(-1L, reg[2], "length SIZE_MAX");
            assertEquals(0, mr.address());
            assertFalse(mr.isHostAccessible());
            refused("MemoryRegion.segment", Errno.EINVAL, mr::segment, "whole address space");
            // a prefetch names an absolute address: the region's offset is the address
            MemorySegment somewhere = Arena.ofAuto().allocate(4096, 4096);
            mr.prefetch(somewhere.address(), 4096);
            assertArrayEquals(new long[] {somewhere.address(), 4096, mr.lkey()}, p.lastAdviseSge(0));
            // more than one SGE's 32-bit length: advised in pieces
            int calls = p.adviseCalls();
            mr.advise(MemoryRegion.Advice.PREFETCH, 1L << 40, 3L * OnDemandPaging.PIECE, false);
            assertEquals(calls + 3, p.adviseCalls());
            assertArrayEquals(
                    new long[] {(1L << 40) + 2 * OnDemandPaging.PIECE, OnDemandPaging.PIECE, mr.lkey()},
                    p.lastAdviseSge(0));
        } finally {
            mr.close();
        }
    }

    @Test
    void withoutTheCapabilityRegistrationIsRefusedNamingIt() {
        MemorySegment memory = Arena.ofAuto().allocate(4096);
        VerbsException e = refused(
                "ibv_reg_mr",
                Errno.EOPNOTSUPP,
                () -> onDemand(memory, WRITE),
                "odp_caps.general_caps has no IBV_ODP_SUPPORT");
        UserMessages.check(e);
        p.setOdpCaps(ODP); // explicit ODP only
        refused(
                "ibv_reg_mr",
                Errno.EOPNOTSUPP,
                () -> implicit(WRITE),
                "odp_caps.general_caps has no IBV_ODP_SUPPORT_IMPLICIT");
        assertEquals(0, p.odpMrLive(), "nothing registered");
    }

    @Test
    void adviceIsRefusedForPinnedRegionsAndRangesOutside() {
        p.setOdpCaps(ODP);
        refused("ibv_advise_mr", Errno.EINVAL, () -> o.mr.prefetch(0, 64), "not registered on demand");
        MemoryRegion mr = onDemand(Arena.ofAuto().allocate(4096), EnumSet.noneOf(Access.class));
        refused("ibv_advise_mr", Errno.EINVAL, () -> mr.prefetch(4000, 200), "outside");
        refused("ibv_advise_mr", Errno.EINVAL, () -> mr.prefetch(0, 0), "empty");
        refused(
                "ibv_advise_mr",
                Errno.EINVAL,
                () -> mr.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 64, true),
                "LOCAL_WRITE");
        mr.close();
        refused("ibv_advise_mr", Errno.EBADF, () -> mr.prefetch(0, 64), "closed");
        refused("ibv_reg_mr", Errno.EINVAL, () -> onDemand(Arena.ofShared().allocate(64), WRITE), "can be closed");
        assertEquals(0, p.adviseCalls(), "nothing reached advise_mr");
    }
}
