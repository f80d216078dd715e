package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The release bookkeeping of buffers of a shared receive queue handed up in place, on the host:
 * in any order of holds, releases (from a live connection or one already gone) and the queue's
 * close, each buffer comes back exactly once: reposted while the queue is open, counted back
 * after; a chunk is let go exactly when its last held buffer comes back after the close, never
 * while one is held; a connection's orphaned buffers stay counted until they come back.
 */
class HeldReceivesTest {
    private static final int PER_CHUNK = 4;

    /** A buffer handed up: its slot, and whether its connection is gone. */
    private record Held(int slot, int connection) {}

    @Property(tries = 300)
    void everyHeldBufferComesBackOnceAndAChunkGoesWithItsLast(
            @ForAll long seed, @ForAll @IntRange(min = 1, max = 4) int chunks) {
        Random random = new Random(seed);
        HeldReceives held = new HeldReceives(chunks, PER_CHUNK);
        List<Integer> posted = new ArrayList<>();
        for (int s = 0; s < chunks * PER_CHUNK; s++) {
            posted.add(s);
        }
        List<Held> out = new ArrayList<>();
        boolean[] gone = new boolean[3];
        boolean[] deregistered = new boolean[chunks];
        boolean closed = false;
        int[] inChunk = new int[chunks];
        for (int step = 0; step < 200; step++) {
            int what = random.nextInt(10);
            if (what < 4 && !closed && !posted.isEmpty()) { // a frame arrives and is handed up in place
                int slot = posted.remove(random.nextInt(posted.size()));
                int conn = random.nextInt(gone.length);
                if (gone[conn]) {
                    posted.add(slot); // a gone connection receives nothing more
                    continue;
                }
                held.hold(slot);
                inChunk[slot / PER_CHUNK]++;
                out.add(new Held(slot, conn));
            } else if (what < 8 && !out.isEmpty()) { // released, on any thread
                Held h = out.remove(random.nextInt(out.size()));
                int c = h.slot() / PER_CHUNK;
                inChunk[c]--;
                int r = held.giveBack(h.slot(), gone[h.connection()]);
                if (!closed) {
                    assertEquals(HeldReceives.REPOST, r, "released while open: reposted");
                    posted.add(h.slot());
                } else if (inChunk[c] == 0) {
                    assertEquals(c, r, "the last held buffer of chunk " + c + " after the close");
                    assertTrue(!deregistered[c], "chunk " + c + " let go once");
                    deregistered[c] = true;
                } else {
                    assertEquals(HeldReceives.KEEP, r, "chunk " + c + " still has buffers held");
                }
            } else if (what == 8) { // a connection goes: what it holds is orphaned
                int conn = random.nextInt(gone.length);
                if (!gone[conn]) {
                    gone[conn] = true;
                    held.orphan((int)
                            out.stream().filter(h -> h.connection() == conn).count());
                }
            } else if (what == 9 && !closed && random.nextInt(4) == 0) {
                held.close();
                closed = true;
                for (int c = 0; c < chunks; c++) {
                    deregistered[c] = held.heldIn(c) == 0; // what the queue deregisters at its close
                    assertEquals(inChunk[c], held.heldIn(c), "held in chunk " + c);
                }
            }
            long orphans = out.stream().filter(h -> gone[h.connection()]).count();
            assertEquals(orphans, held.orphans(), "orphaned buffers still out");
        }
        for (int c = 0; c < chunks; c++) {
            assertEquals(inChunk[c], held.heldIn(c), "held in chunk " + c);
        }
    }

    @Test
    void aBufferGivenBackTwiceIsRefused() {
        HeldReceives held = new HeldReceives(2, PER_CHUNK);
        held.hold(5);
        assertEquals(HeldReceives.REPOST, held.giveBack(5, false));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> held.giveBack(5, false));
        assertTrue(e.getMessage().contains("given back twice"), e.getMessage());
        held.hold(1);
        assertThrows(IllegalStateException.class, () -> held.giveBack(1, true), "an orphan never orphaned");
        assertEquals(1, held.heldIn(0), "the refused give-back changed nothing");
        held.hold(0); // slots 0 and 1 of chunk 0 held: slot 0 given back twice is still refused
        assertEquals(HeldReceives.REPOST, held.giveBack(0, false));
        assertThrows(IllegalStateException.class, () -> held.giveBack(0, false), "slot 0 again, slot 1 held");
        assertEquals(1, held.heldIn(0), "slot 1 still held");
        assertThrows(IllegalStateException.class, () -> held.giveBack(2, false), "a slot never held");
        assertEquals(HeldReceives.REPOST, held.giveBack(1, false));
    }

    @Test
    void aChunkHeldAtTheCloseIsLetGoWithItsLastBuffer() {
        HeldReceives held = new HeldReceives(2, PER_CHUNK);
        held.hold(4);
        held.hold(6);
        held.orphan(2); // the connection went first, then the queue
        held.close();
        assertEquals(0, held.heldIn(0), "chunk 0 is idle at the close");
        assertEquals(HeldReceives.KEEP, held.giveBack(6, true));
        assertEquals(1, held.giveBack(4, true), "the last buffer of chunk 1 lets it go");
        assertEquals(0, held.orphans());
    }
}
