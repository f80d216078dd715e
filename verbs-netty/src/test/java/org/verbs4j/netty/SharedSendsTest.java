package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.Unpooled;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * A loop's shared send buffers' accounting on the host, registration stood in for: chunks come
 * as connections join and as their sends need more, never past the cap; a connection holding none
 * always gets one while others may not take the last; one that finds none is told once a buffer
 * comes back; every buffer is handed to one holder at a time, and all are back and deregistered at
 * the end.
 */
class SharedSendsTest {
    private static final int SIZE = 1024;

    /** Registrations stood in for: each chunk's bytes and whether it was deregistered. */
    private static final class Registrar implements SharedSends.Registrar {
        final List<long[]> chunks = new ArrayList<>(); // {bytes, deregistered}
        boolean fail;
        int attempts;

        @Override
        public SharedSends.Chunk register(long bytes) {
            attempts++;
            if (fail) {
                throw new IllegalStateException("ENOMEM stood in for");
            }
            long[] c = {bytes, 0};
            chunks.add(c);
            return new SharedSends.Chunk(null, Unpooled.buffer((int) bytes), bytes, () -> c[1]++);
        }

        long registered() {
            long b = 0;
            for (long[] c : chunks) {
                b += c[1] == 0 ? c[0] : 0;
            }
            return b;
        }
    }

    /** The loop's task queue, run when the test says. */
    private static final class Loop implements java.util.concurrent.Executor {
        final ArrayDeque<Runnable> tasks = new ArrayDeque<>();

        @Override
        public void execute(Runnable r) {
            tasks.add(r);
        }

        void runAll() {
            for (Runnable r; (r = tasks.poll()) != null; ) {
                r.run();
            }
        }
    }

    @Test
    void aConnectionHoldingNoneGetsOneWhileOthersMayNotTakeTheLast() {
        Registrar reg = new Registrar();
        Loop loop = new Loop();
        SharedSends pool = new SharedSends(SIZE, 4L * SIZE, reg, loop);
        int[] woken = new int[2];
        SharedSends.Account a = pool.join(() -> woken[0]++), b = pool.join(() -> woken[1]++);
        pool.cover();
        assertEquals(1, reg.chunks.size(), "one chunk covers both connections");
        assertEquals(4L * SIZE, reg.chunks.getFirst()[0], "no more than the cap: 4 buffers");
        assertEquals(4L * SIZE, pool.registeredBytes());
        int a1 = pool.take(a), a2 = pool.take(a), a3 = pool.take(a);
        assertTrue(a1 >= 0 && a2 >= 0 && a3 >= 0, "three for a, one left for b");
        assertEquals(-1, pool.take(a), "a may not take the buffer b holds none but");
        assertEquals(3L * SIZE, pool.bytesInUse());
        int b1 = pool.take(b);
        assertTrue(b1 >= 0, "b, holding none, gets the last");
        assertEquals(-1, pool.take(b), "none free");
        assertEquals(0, loop.tasks.size(), "nobody is told before a buffer comes back");
        pool.give(a, a1);
        loop.runAll();
        assertEquals(1, woken[0], "a is told once");
        assertEquals(1, woken[1], "b is told once");
        assertTrue(pool.take(b) >= 0, "the buffer back goes to whoever asks first");
        assertEquals(4, new java.util.HashSet<>(List.of(a1, a2, a3, b1)).size(), "four distinct buffers");
        assertEquals(4, pool.sliced(), "never past the cap");
        assertEquals(1, reg.chunks.size(), "no registration past the cap");
    }

    @Test
    void chunksAreAddedAsSendsNeedThemAndGoAtClose() {
        Registrar reg = new Registrar();
        Loop loop = new Loop();
        long statsBefore = RdmaStats.snapshot().sharedSendRegisteredBytes();
        SharedSends pool = new SharedSends(SIZE, 150L * SIZE, reg, loop);
        SharedSends.Account a = pool.join(() -> {});
        pool.cover();
        assertEquals(SharedSends.CHUNK, pool.sliced(), "one chunk for the first connection");
        assertEquals(SharedSends.CHUNK * (long) SIZE, RdmaStats.snapshot().sharedSendRegisteredBytes() - statsBefore);
        List<Integer> held = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
            int buf = pool.take(a);
            assertTrue(buf >= 0, "buffer " + i + " of the cap");
            held.add(buf);
        }
        assertEquals(3, reg.chunks.size(), "chunks of 64, 64 and 22: the cap");
        assertEquals(22L * SIZE, reg.chunks.get(2)[0]);
        assertEquals(-1, pool.take(a), "past the cap: none");
        assertEquals(150L * SIZE, pool.bytesInUse());
        for (int buf : held) {
            pool.give(a, buf);
            assertTrue(pool.chunk(buf).view().capacity() >= pool.offset(buf) + SIZE, "within its chunk");
        }
        assertEquals(0, pool.bytesInUse());
        pool.leave(a);
        pool.close();
        assertEquals(0, reg.registered(), "every chunk deregistered");
        assertEquals(0, pool.registeredBytes());
        assertEquals(statsBefore, RdmaStats.snapshot().sharedSendRegisteredBytes(), "the totals back");
    }

    @Test
    void aFailedRegistrationStopsTheGrowthAndTheBuffersRegisteredServeOn() {
        Registrar reg = new Registrar();
        SharedSends pool = new SharedSends(SIZE, 1000L * SIZE, reg, new Loop());
        SharedSends.Account a = pool.join(() -> {});
        pool.cover();
        reg.fail = true;
        List<Integer> held = new ArrayList<>();
        for (int buf; (buf = pool.take(a)) >= 0; ) {
            held.add(buf);
        }
        assertEquals(SharedSends.CHUNK, held.size(), "the first chunk's buffers, no more");
        pool.give(a, held.removeLast());
        assertTrue(pool.take(a) >= 0, "a buffer back is taken again");
        int attempts = reg.attempts;
        SharedSends.Account b = pool.join(() -> {});
        reg.fail = false;
        pool.cover(); // no growth past a failure, not even for a join: b shares what is registered
        assertEquals(SharedSends.CHUNK, pool.sliced());
        assertEquals(attempts, reg.attempts, "no registration tried again");
        pool.close();
        assertEquals(0, reg.registered());
        assertFalse(pool.take(b) >= 0, "nothing taken once closed");
    }

    @Test
    void aJoiningConnectionWhoseBufferCannotBeRegisteredIsRefused() {
        Registrar reg = new Registrar();
        reg.fail = true;
        SharedSends pool = new SharedSends(SIZE, 1000L * SIZE, reg, new Loop());
        SharedSends.Account a = pool.join(() -> {});
        assertThrows(IllegalStateException.class, pool::cover, "the registration's failure reaches the connect");
        pool.leave(a);
        reg.fail = false;
        SharedSends.Account b = pool.join(() -> {});
        pool.cover(); // with none registered, the next join tries again
        assertEquals(SharedSends.CHUNK, pool.sliced());
        assertTrue(pool.take(b) >= 0, "b has its buffer");
        pool.close();
    }

    @Test
    void aJoinWhoseChunkCannotBeRegisteredSharesAndLaterJoinsTryNoMore() {
        Registrar reg = new Registrar();
        SharedSends pool = new SharedSends(SIZE, 1000L * SIZE, reg, new Loop());
        List<SharedSends.Account> members = new ArrayList<>();
        for (int i = 0; i < SharedSends.CHUNK; i++) {
            members.add(pool.join(() -> {}));
            pool.cover();
        }
        assertEquals(1, reg.attempts, "one chunk covers the first 64");
        reg.fail = true;
        SharedSends.Account late = pool.join(() -> {});
        pool.cover(); // its chunk fails: it shares the 64 registered, as after a failure on the loop
        assertEquals(2, reg.attempts);
        for (int i = 0; i < 3; i++) {
            pool.join(() -> {});
            pool.cover();
        }
        assertEquals(2, reg.attempts, "later joins try no registration past the failure");
        assertEquals(SharedSends.CHUNK, pool.sliced());
        int b = pool.take(late);
        assertTrue(b >= 0, "a connection holding none takes a free buffer");
        assertEquals(2, reg.attempts, "nor do takes");
        pool.give(late, b);
        pool.close();
        assertEquals(0, reg.registered());
    }

    /**
     * Random takes and gives by several connections: each buffer has one holder at a time, free
     * and held always add up to the buffers registered, a connection holding none always gets one
     * when any is free, and one refused is told once a buffer comes back.
     */
    @Property(tries = 200)
    void buffersAreHeldByOneConnectionAtATimeAndAllComeBack(
            @ForAll long seed,
            @ForAll @IntRange(min = 1, max = 6) int connections,
            @ForAll @IntRange(min = 1, max = 200) int capBuffers) {
        Random random = new Random(seed);
        Registrar reg = new Registrar();
        Loop loop = new Loop();
        SharedSends pool = new SharedSends(SIZE, (long) capBuffers * SIZE, reg, loop);
        List<SharedSends.Account> accounts = new ArrayList<>();
        List<ArrayDeque<Integer>> held = new ArrayList<>();
        boolean[] told = new boolean[connections];
        boolean[] refused = new boolean[connections];
        for (int i = 0; i < connections; i++) {
            int id = i;
            accounts.add(pool.join(() -> told[id] = true));
            held.add(new ArrayDeque<>());
            pool.cover();
        }
        BitSet out = new BitSet();
        for (int step = 0; step < 500; step++) {
            int c = random.nextInt(connections);
            if (random.nextInt(3) > 0) {
                boolean holdsNone = held.get(c).isEmpty();
                int free = pool.free();
                int buf = pool.take(accounts.get(c));
                if (holdsNone && free > 0) {
                    assertTrue(buf >= 0, "a connection holding none gets a free buffer");
                }
                if (buf >= 0) {
                    assertFalse(out.get(buf), "buffer " + buf + " has one holder");
                    out.set(buf);
                    held.get(c).add(buf);
                } else {
                    refused[c] = true;
                    told[c] = false;
                }
            } else if (!held.get(c).isEmpty()) {
                int buf = held.get(c).poll();
                out.clear(buf);
                pool.give(accounts.get(c), buf);
                loop.runAll();
                for (int i = 0; i < connections; i++) {
                    if (refused[i]) {
                        assertTrue(told[i], "a refused connection is told once a buffer came back");
                        refused[i] = false;
                    }
                }
            }
            assertEquals(pool.sliced(), pool.free() + out.cardinality(), "free and held add up");
            assertTrue(pool.sliced() <= capBuffers, "within the cap");
        }
        for (int i = 0; i < connections; i++) {
            for (int buf : held.get(i)) {
                pool.give(accounts.get(i), buf);
            }
            pool.leave(accounts.get(i));
        }
        assertEquals(0, pool.bytesInUse());
        assertEquals(pool.sliced(), pool.free());
        pool.close();
        assertEquals(0, reg.registered());
    }
}
