package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** The plain host allocators of {@link RegionAllocator}. Stateless; any thread. */
final class HostAllocators {
    private HostAllocators() {}

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

    /**
     * Pool-owned memory bounded by a caller's arena: a close action on that arena runs the pool's
     * release (deregister, then free) or, before the pool is built, frees the memory.
     */
    record FromArena(Arena arena) implements RegionAllocator {
        @Override
        public Allocation allocate(long byteSize, long alignment) {
            if (!arena.scope().isAlive()) {
                throw new org.verbs4j.ResourceClosedException(
                        "BufferPool.build",
                        "the arena for the pool's memory is already closed",
                        "pass an open arena to RegionAllocator.of(arena)");
            }
            Arena own = Arena.ofShared();
            Allocation a;
            try {
                a = new Allocation(
                        own.allocate(byteSize, alignment),
                        "host (pool-owned, bounded by the caller's arena)",
                        own::close);
            } catch (RuntimeException | OutOfMemoryError e) {
                own.close();
                throw e;
            }
            try {
                // a zero-length segment in the caller's arena only to run an action when it closes
                MemorySegment.NULL.reinterpret(0, arena, ignored -> {
                    Runnable r = a.revoke;
                    if (r != null) {
                        r.run();
                    } else {
                        a.close(); // the pool was never built (or already released it): close is idempotent
                    }
                });
            } catch (RuntimeException | Error e) {
                a.close();
                throw e;
            }
            return a;
        }

        @Override
        public String description() {
            return "host (pool-owned, bounded by the caller's arena " + arena + ")";
        }
    }
}
