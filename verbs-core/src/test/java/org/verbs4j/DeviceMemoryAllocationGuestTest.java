package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): device memory as the device reports it. Where the capability report says no
 * (rxe: max_dm_size 0), {@link Context#allocateDeviceMemory} is refused naming that attribute;
 * where it says yes, bytes written to device memory come back and a region is registered on it.
 */
@RdmaTest
class DeviceMemoryAllocationGuestTest {
    @Test
    void deviceMemoryFollowsTheReportedCapability() {
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            CapabilityReport.Feature f =
                    ctx.capabilities().feature("device memory").orElseThrow();
            System.out.println(ctx.deviceName() + " " + f);
            if (f.supported()) {
                try (DeviceMemory dm = ctx.allocateDeviceMemory(4096);
                        Arena arena = Arena.ofConfined()) {
                    MemorySegment src = arena.allocate(64).fill((byte) 0x5a);
                    MemorySegment back = arena.allocate(64);
                    dm.write(0, src);
                    dm.read(0, back);
                    assertEquals(-1, src.mismatch(back));
                    try (MemoryRegion mr = dm.register(pd, 0, 4096, EnumSet.of(Access.LOCAL_WRITE))) {
                        assertEquals(0, mr.address());
                        System.out.println(ctx.deviceName() + " device memory registered: " + mr);
                    }
                }
            } else {
                assertEquals(DeviceMemory.NO_DM, f.detail());
                VerbsException e = assertThrows(VerbsException.class, () -> ctx.allocateDeviceMemory(4096));
                UserMessages.check(e);
                assertEquals("ibv_alloc_dm", e.verb(), e.getMessage());
                assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
                assertTrue(
                        e.getMessage().contains(ctx.deviceName() + " offers no device memory: " + DeviceMemory.NO_DM));
                System.out.println(ctx.deviceName() + " allocateDeviceMemory: " + e.getMessage());
            }
            assertTrue(pd.isOpen());
        }
    }
}
