package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): on-demand paging as the device reports it. Where the capability report says
 * no ODP (rxe on Linux 6.1), an on-demand registration, an implicit one, and their refusal name
 * the missing capability (the device attribute); where it says yes, a region is registered on
 * demand and prefetched.
 */
@RdmaTest
class OnDemandPagingGuestTest {
    @Test
    void onDemandRegistrationFollowsTheReportedCapability() {
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            CapabilityReport r = ctx.capabilities();
            CapabilityReport.Feature odp = r.feature("odp").orElseThrow();
            CapabilityReport.Feature implicit = r.feature("implicit odp").orElseThrow();
            System.out.println(ctx.deviceName() + " " + odp + "\n" + ctx.deviceName() + " " + implicit);
            MemorySegment memory = Arena.ofAuto().allocate(1 << 16, 4096);
            if (odp.supported()) {
                try (MemoryRegion mr = pd.registerOnDemand(memory, Access.LOCAL_WRITE)) {
                    mr.prefetch(0, memory.byteSize());
                    System.out.println(ctx.deviceName() + " on-demand region registered and prefetched: " + mr);
                }
            } else {
                assertEquals(OnDemandPaging.NO_ODP, odp.detail());
                VerbsException e =
                        assertThrows(VerbsException.class, () -> pd.registerOnDemand(memory, Access.LOCAL_WRITE));
                refusal(e, OnDemandPaging.NO_ODP);
                System.out.println(ctx.deviceName() + " registerOnDemand: " + e.getMessage());
            }
            if (implicit.supported()) {
                try (MemoryRegion mr = pd.registerImplicitOnDemand(Access.LOCAL_WRITE)) {
                    mr.prefetch(memory.address(), 4096);
                }
            } else {
                VerbsException e =
                        assertThrows(VerbsException.class, () -> pd.registerImplicitOnDemand(Access.LOCAL_WRITE));
                refusal(e, odp.supported() ? OnDemandPaging.NO_IMPLICIT : OnDemandPaging.NO_ODP);
                System.out.println(ctx.deviceName() + " registerImplicitOnDemand: " + e.getMessage());
            }
            assertTrue(pd.isOpen());
        }
    }

    private static void refusal(VerbsException e, String capability) {
        UserMessages.check(e);
        assertEquals("ibv_reg_mr", e.verb(), e.getMessage());
        assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
        assertTrue(e.getMessage().contains(capability), e.getMessage());
    }
}
