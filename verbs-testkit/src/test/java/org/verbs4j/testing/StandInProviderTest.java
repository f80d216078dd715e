package org.verbs4j.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/** The stand-in's objects as the kit hands them out, without any verbs4j module. */
class StandInProviderTest {

    @Test
    void objectsComeWithTheStandInsOwnSizesAndNameTheirContext() {
        try (StandInProvider p = StandInProvider.open()) {
            // struct ibv_pd { struct ibv_context *context; uint32_t handle; }; ibv_qp/ibv_cq start the same way
            for (MemorySegment o : new MemorySegment[] {p.pd(), p.qp(), p.cq(), p.srq()}) {
                assertTrue(o.byteSize() >= ADDRESS.byteSize(), o.toString());
                assertEquals(p.context().address(), o.get(ADDRESS, 0).address(), "the object's context");
            }
            assertTrue(p.context().byteSize() > p.pd().byteSize(), "an ibv_context is larger than an ibv_pd");
            MemorySegment other = p.makeContext(false);
            assertNotEquals(p.context().address(), other.address());
            assertEquals(other.address(), p.makePd(other).get(ADDRESS, 0).address());
        }
    }

    @Test
    void closeEndsTheArena() {
        StandInProvider p = StandInProvider.open();
        MemorySegment buffer = p.arena().allocate(64);
        buffer.fill((byte) 1);
        p.close();
        assertFalse(p.arena().scope().isAlive(), "the arena closes with the provider");
        p.close(); // idempotent
    }
}
