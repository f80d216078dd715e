package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * How the loop's shared receive queue grows, on the host: chunk by chunk while reservations pass
 * the buffers sliced, never past its cap, never a chunk of no buffers (the device refuses one).
 */
class SharedReceivesTest {
    private static final int CHUNK = SharedReceives.CHUNK;

    @Test
    void aChunkIsRegisteredOnlyWhileReservationsPassTheBuffersSliced() {
        assertEquals(CHUNK, SharedReceives.nextChunk(0, 1, 4 * CHUNK), "the first reservation");
        assertEquals(0, SharedReceives.nextChunk(CHUNK, CHUNK, 4 * CHUNK), "covered already");
        assertEquals(10, SharedReceives.nextChunk(CHUNK, CHUNK + 1, CHUNK + 10), "the last chunk is short");
        int max = 4 * CHUNK; // a full pool counted twice for a moment (orphaned, not yet unreserved)
        assertEquals(0, SharedReceives.nextChunk(max, max + 3, max), "nothing more to register");
    }

    @Property(tries = 500)
    void growingCoversEveryReservationUpToTheCapInNonEmptyChunks(
            @ForAll @IntRange(min = 1, max = 600) int maxBuffers, @ForAll @IntRange(min = 0, max = 800) int wanted) {
        int sliced = 0;
        int chunks = 0;
        for (int n; (n = SharedReceives.nextChunk(sliced, wanted, maxBuffers)) != 0; ) {
            assertTrue(n > 0 && n <= CHUNK, "a chunk of " + n + " buffers");
            sliced += n;
            assertTrue(sliced <= maxBuffers, sliced + " sliced past the cap " + maxBuffers);
            assertTrue(++chunks <= maxBuffers, "growing ends");
        }
        assertTrue(sliced >= Math.min(wanted, maxBuffers), sliced + " sliced cover " + wanted + " reserved");
    }
}
