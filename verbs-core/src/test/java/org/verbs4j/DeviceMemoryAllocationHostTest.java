package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.DeviceMemoryVerbs;
import org.verbs4j.natives.Errno;

/**
 * Host tier: device memory ({@code ibv_alloc_dm}) over the stand-in provider, whose verbs_context
 * implements alloc_dm, free_dm (EBUSY while a region is on it) and reg_dm_mr (zero-based only, as
 * mlx5), whose {@code struct ibv_dm} copies with memcpy_to_dm / memcpy_from_dm, and whose
 * query_device_ex reports the max_dm_size a test sets. Bytes written come back; a region
 * reaches the provider zero-based; every overrun, of the device memory or of the Java segment, is
 * refused before a copy reaches the provider.
 */
class DeviceMemoryAllocationHostTest extends StandInHostTest {
    private static final Set<Access> RIGHTS = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ);

    private MemoryRegion region(DeviceMemory dm, long offset, long length) {
        return dm.register(o.pd, offset, length, RIGHTS, h -> p.deregDeviceMemoryRegion(h.address()));
    }

    private static MemorySegment pattern(Arena arena, int n, int seed) {
        MemorySegment s = arena.allocate(n);
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + 7 * i));
        }
        return s;
    }

    @Test
    void bytesWrittenComeBackAndARegionIsZeroBased() {
        DeviceMemory dm = o.ctx.allocateDeviceMemory(4096);
        assertEquals(1, p.deviceMemoryLive());
        assertEquals(4096, dm.length());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = pattern(arena, 256, 3);
            dm.write(100, src);
            dm.write(4096 - 256, pattern(arena, 256, 91)); // the last byte
            MemorySegment back = arena.allocate(256);
            dm.read(100, back);
            assertEquals(-1, src.mismatch(back), "the bytes written come back");
            dm.read(4096 - 256, back);
            assertEquals(-1, pattern(arena, 256, 91).mismatch(back));
            assertEquals(4, p.deviceMemoryCopies());
        }
        MemoryRegion mr = region(dm, 1024, 2048);
        assertArrayEquals(
                new long[] {1024, 2048, Access.mask(RIGHTS) | DeviceMemoryVerbs.ACCESS_ZERO_BASED},
                p.lastDeviceMemoryRegistration(),
                "reg_dm_mr got the range and the rights, zero-based");
        assertEquals(0, mr.address());
        assertEquals(2048, mr.length());
        assertFalse(mr.isHostAccessible());
        assertEquals(1, p.deviceMemoryRegionsLive());
        refused("ibv_free_dm", Errno.EBUSY, dm::close, "device memory");
        refused("ibv_dealloc_pd", Errno.EBUSY, o.pd::close);
        mr.close();
        assertEquals(0, p.deviceMemoryRegionsLive());
        dm.close();
        assertEquals(0, p.deviceMemoryLive());
    }

    @Test
    void copiesOutsideTheDeviceMemoryOrTheSegmentAreRefused() {
        DeviceMemory dm = o.ctx.allocateDeviceMemory(4096);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment n200 = arena.allocate(200);
            refused("ibv_memcpy_to_dm", Errno.EINVAL, () -> dm.write(4000, n200), "outside the 4096 bytes");
            refused("ibv_memcpy_to_dm", Errno.EINVAL, () -> dm.write(-1, n200), "outside");
            refused("ibv_memcpy_to_dm", Errno.EINVAL, () -> dm.write(Long.MAX_VALUE, n200), "outside");
            refused("ibv_memcpy_from_dm", Errno.EINVAL, () -> dm.read(0, arena.allocate(4097)), "outside");
            refused("ibv_memcpy_from_dm", Errno.EINVAL, () -> dm.read(0, n200.asReadOnly()), "read-only");
            refused("ibv_memcpy_to_dm", Errno.EINVAL, () -> dm.write(0, MemorySegment.ofArray(new byte[8])), "heap");
            refused("ibv_memcpy_to_dm", Errno.EINVAL, () -> dm.write(0, null), "null");
            refused("ibv_reg_dm_mr", Errno.EINVAL, () -> region(dm, 4000, 200), "outside");
            refused("ibv_reg_dm_mr", Errno.EINVAL, () -> region(dm, 0, 0), "empty");
            refused(
                    "ibv_reg_dm_mr",
                    Errno.EINVAL,
                    () -> dm.register(o.pd, 0, 64, EnumSet.of(Access.REMOTE_WRITE), h -> {}),
                    "LOCAL_WRITE");
        }
        MemorySegment gone;
        try (Arena closed = Arena.ofConfined()) {
            gone = closed.allocate(64);
        }
        refused("ibv_memcpy_to_dm", Errno.EFAULT, () -> dm.write(0, gone), "cannot be accessed");
        assertEquals(0, p.deviceMemoryCopies(), "no copy reached the provider");
        assertEquals(0, p.deviceMemoryRegionsLive());
        dm.close();
        refused(
                "ibv_memcpy_to_dm",
                Errno.EBADF,
                () -> dm.write(0, Arena.ofAuto().allocate(8)),
                "closed");
        refused("ibv_reg_dm_mr", Errno.EBADF, () -> region(dm, 0, 64), "closed");
        refused("ibv_free_dm", Errno.EBADF, dm::close, "already closed");
        assertEquals(0, p.deviceMemoryLive());
    }

    @Test
    void allocationFollowsTheReportedMaximum() {
        p.setMaxDmSize(0);
        VerbsException e = refused(
                "ibv_alloc_dm", Errno.EOPNOTSUPP, () -> o.ctx.allocateDeviceMemory(64), DeviceMemory.NO_DM, "standin0");
        assertTrue(e.hint().contains("host memory"), e.getMessage());
        p.setMaxDmSize(4096);
        refused("ibv_alloc_dm", Errno.EINVAL, () -> o.ctx.allocateDeviceMemory(4097), "max_dm_size");
        refused("ibv_alloc_dm", Errno.EINVAL, () -> o.ctx.allocateDeviceMemory(0), "max_dm_size");
        refused("ibv_alloc_dm", Errno.EINVAL, () -> o.ctx.allocateDeviceMemory(-1), "max_dm_size");
        assertEquals(0, p.deviceMemoryLive(), "nothing allocated");
        o.ctx.allocateDeviceMemory(4096).close();
        assertEquals(0, p.deviceMemoryLive());
    }
}
