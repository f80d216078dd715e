package org.verbs4j.bench.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;

/** Host memory: a shared arena per buffer, page-aligned, registered once. Any thread. */
final class HostBufferProvider implements BufferProvider {

    @Override
    public PerfBuffer allocate(ProtectionDomain pd, long bytes, Set<Access> access) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg = arena.allocate(bytes, 4096);
            seg.fill((byte) 0);
            MemoryRegion mr = pd.register(arena, seg, access);
            return new PerfBuffer() {
                @Override
                public MemorySegment segment() {
                    return seg;
                }

                @Override
                public MemoryRegion region() {
                    return mr;
                }

                @Override
                public void close() {
                    try {
                        mr.close();
                    } finally {
                        arena.close();
                    }
                }
            };
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    @Override
    public String describe() {
        return "host memory";
    }
}
