package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The queue-pair table of a shared receive queue against a HashMap, through puts, removes and growth. */
class QpTableTest {
    @Test
    void agreesWithAHashMapThroughRandomPutsAndRemoves() {
        QpTable<String> t = new QpTable<>();
        Map<Integer, String> m = new HashMap<>();
        String[] streams = {"a", "b", "c", "d", "e", "f", "g", "h"};
        Random r = new Random(5);
        for (int step = 0; step < 20_000; step++) {
            int qpn = r.nextInt(300) * 17 + 1; // colliding keys (a multiple pattern) and a range that grows the table
            if (r.nextInt(3) == 0) {
                t.remove(qpn);
                m.remove(qpn);
            } else {
                String s = streams[r.nextInt(streams.length)];
                t.put(qpn, s);
                m.put(qpn, s);
            }
            int probe = r.nextInt(300) * 17 + 1;
            assertSame(m.get(probe), t.get(probe), "qp " + probe + " after step " + step);
        }
        assertEquals(m.size(), t.size());
        for (int k = 0; k < 300 * 17 + 1; k++) {
            assertSame(m.get(k), t.get(k), "qp " + k);
        }
        assertNull(t.get(-1));
    }
}
