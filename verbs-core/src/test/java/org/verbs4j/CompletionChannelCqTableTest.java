package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.ref.WeakReference;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Host tier: the completion channel's table of CQs by address (primitive keys, so that the event
 * path's lookup allocates nothing) agrees with a {@link HashMap} over long random sequences of
 * attaches, detaches and lookups, with addresses spaced as allocations are and with many that
 * share a home slot (the deletions that shift probe runs back).
 */
class CompletionChannelCqTableTest {
    private static final WeakReference<CompletionQueue> NONE = new WeakReference<>(null);

    @Test
    void agreesWithAHashMapOverRandomAttachesAndDetaches() {
        for (long seed = 1; seed <= 20; seed++) {
            Random random = new Random(seed);
            CompletionChannel.CqTable table = new CompletionChannel.CqTable();
            Map<Long, WeakReference<CompletionQueue>> model = new HashMap<>();
            long[] universe = new long[seed % 2 == 0 ? 40 : 400]; // few: dense runs; many: growth
            for (int i = 0; i < universe.length; i++) {
                universe[i] = 0x7f00_0000_0000L + (long) i * (seed % 3 == 0 ? 64 : 4096);
            }
            for (int op = 0; op < 20_000; op++) {
                long address = universe[random.nextInt(universe.length)];
                switch (random.nextInt(3)) {
                    case 0 -> {
                        WeakReference<CompletionQueue> ref = new WeakReference<>(null);
                        table.put(address, ref);
                        model.put(address, ref);
                    }
                    case 1 -> {
                        table.remove(address);
                        model.remove(address);
                    }
                    default -> assertSame(model.get(address), table.get(address), "seed " + seed + ", op " + op);
                }
                assertEquals(model.size(), table.size(), "seed " + seed + ", op " + op);
            }
            for (long address : universe) {
                assertSame(model.get(address), table.get(address), "seed " + seed);
            }
        }
    }

    @Test
    void aDetachedCqIsNeverResolvedAndOthersStayReachable() {
        CompletionChannel.CqTable table = new CompletionChannel.CqTable();
        for (long a = 1; a <= 1_000; a++) {
            table.put(a << 6, NONE);
        }
        for (long a = 1; a <= 1_000; a += 2) {
            table.remove(a << 6);
        }
        for (long a = 1; a <= 1_000; a++) {
            if (a % 2 == 1) {
                assertNull(table.get(a << 6), "detached " + a);
            } else {
                assertSame(NONE, table.get(a << 6), "still attached " + a);
            }
        }
        assertEquals(500, table.size());
        table.remove(12_345L << 6); // never attached: nothing changes
        assertEquals(500, table.size());
        assertNull(table.get(0x1234), "an address never attached");
    }

    @Test
    void addressZeroIsRefused() {
        CompletionChannel.CqTable table = new CompletionChannel.CqTable();
        assertThrows(IllegalArgumentException.class, () -> table.put(0, NONE));
    }
}
