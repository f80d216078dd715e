package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** The plain host allocators of {@link RegionAllocator}. Stateless; any thread. */
final class HostAllocators {
    private HostAllocators() {
    }

    static final RegionAllocator SHARED = new RegionAllocator() {
        @Override
        public Allocation allocate(long byteSize, long alignment) {
            Arena arena = Arena.ofShared();
            try {
                return new Allocation(arena.allocate(byteSize, alignment), "host (Arena.ofShared)", arena::close);
            } catch (RuntimeException | OutOfMemoryError e) {
                arena.close();
                throw e;
            }
        }

        @Override
        public String description() {
            return "host (Arena.ofShared)";
        }
    };

    static final RegionAllocator AUTO = new RegionAllocator() {
        @Override
        public Allocation allocate(long byteSize, long alignment) {
            MemorySegment s = Arena.ofAuto().allocate(byteSize, alignment);
            return new Allocation(s, "host (Arena.ofAuto)", null);
        }

        @Override
        public String description() {
            return "host (Arena.ofAuto)";
        }
    };

    record FromArena(Arena arena) implements RegionAllocator {
        @Override
        public Allocation allocate(long byteSize, long alignment) {
            return new Allocation(arena.allocate(byteSize, alignment), "host (caller's arena)", null);
        }

        @Override
        public String description() {
            return "host (caller's arena " + arena + ")";
        }
    }
}
