package org.verbs4j.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.DeviceMemory;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;

/**
 * perftest's {@code --dm}: the buffer in the adapter's own memory ({@link DeviceMemory},
 * {@code ibv_alloc_dm}), zeroed by a copy and registered zero-based ({@code ibv_reg_dm_mr}) once,
 * before any timing. It has no host view ({@link PerfBuffer#segment()} is {@link MemorySegment#NULL}):
 * only the bandwidth tests use it. Where the device has no device memory (rxe) allocation is
 * refused with EOPNOTSUPP naming the attribute. One thread.
 */
final class DeviceMemoryBufferProvider implements BufferProvider {
    private String described = "device memory (ibv_alloc_dm)";

    @Override
    public PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access) {
        DeviceMemory dm = pd.context().allocateDeviceMemory(bytes);
        MemoryRegion mr;
        try {
            try (Arena zeros = Arena.ofConfined()) {
                dm.write(0, zeros.allocate(bytes)); // allocate zeroes its memory
            }
            mr = dm.register(pd, 0, bytes, access);
        } catch (RuntimeException e) {
            dm.close();
            throw e;
        }
        described = "device memory (ibv_alloc_dm, " + (bytes >> 10) + " KiB registered zero-based before timing)";
        return BufferProvider.withoutHostView(mr, () -> {
            try {
                mr.close();
            } finally {
                dm.close();
            }
        });
    }

    @Override
    public String describe() {
        return described;
    }
}
