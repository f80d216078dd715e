package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The credit ledger alone: its rules, the peer's lies it refuses, and two ledgers that never deadlock. */
class CreditsTest {
    @Test
    void theLastCreditGoesOnlyWithReturnedCredits() throws Exception {
        Credits c = new Credits(4, 4);
        c.spend();
        c.spend();
        c.spend();
        assertEquals(1, c.available());
        assertFalse(c.canSendData(), "the last credit is kept for a frame that returns credits");
        c.reposted(1);
        assertTrue(c.canSendData());
        assertEquals(1, c.spend(), "the frame carries the credit owed");
        assertEquals(0, c.owed());
        assertThrows(IllegalStateException.class, c::spend);
        c.returned(4);
        assertEquals(4, c.available());
    }

    @Test
    void anEmptyFrameGoesOnceHalfTheBuffersAreOwed() {
        Credits c = new Credits(8, 8);
        c.reposted(3);
        assertFalse(c.shouldSendCreditFrame());
        c.reposted(1);
        assertTrue(c.shouldSendCreditFrame());
    }

    @Test
    void creditsNeverOwedCloseTheConnection() throws Exception {
        Credits c = new Credits(4, 4);
        ProtocolViolationException e = assertThrows(ProtocolViolationException.class, () -> c.returned(1));
        assertTrue(e.getMessage().contains("returned 1 credits, but only 0"), e.getMessage());
        c.spend();
        c.returned(1);
        assertThrows(ProtocolViolationException.class, () -> c.returned(-1), "2^32-1 as unsigned");
        assertEquals(4, c.available(), "a refused return changes nothing");
    }

    @Test
    void fewerThanFourBuffersAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new Credits(3, 4));
        assertThrows(IllegalArgumentException.class, () -> new Credits(4, 2));
    }

    /**
     * Two ledgers joined by two in-order wires, both receivers consuming every frame at once:
     * with random data on both sides, or one side only, every data frame gets through, no frame
     * is sent without a credit, and empty frames stop once nothing is sent.
     */
    @Test
    void twoSidesNeverDeadlockAndEmptyFramesDieOut() throws Exception {
        Random r = new Random(7);
        for (int round = 0; round < 200; round++) {
            int ra = 4 + r.nextInt(13), rb = 4 + r.nextInt(13);
            Credits a = new Credits(rb, ra), b = new Credits(ra, rb);
            ArrayDeque<int[]> toB = new ArrayDeque<>(), toA = new ArrayDeque<>(); // {returned, isData}
            int dataA = r.nextInt(500), dataB = round % 2 == 0 ? 0 : r.nextInt(500);
            int steps = 0, emptyAfterData = 0;
            while (dataA > 0 || dataB > 0 || !toA.isEmpty() || !toB.isEmpty()) {
                assertTrue(++steps < 100_000, "no progress: a deadlock");
                boolean moved = false;
                if (dataA > 0 && a.canSendData()) {
                    toB.add(new int[] {a.spend(), 1});
                    dataA--;
                    moved = true;
                } else if (a.shouldSendCreditFrame()) {
                    toB.add(new int[] {a.spend(), 0});
                    moved = true;
                }
                if (dataB > 0 && b.canSendData()) {
                    toA.add(new int[] {b.spend(), 1});
                    dataB--;
                    moved = true;
                } else if (b.shouldSendCreditFrame()) {
                    toA.add(new int[] {b.spend(), 0});
                    moved = true;
                }
                if (!toB.isEmpty() && (r.nextBoolean() || !moved)) {
                    int[] f = toB.poll();
                    b.returned(f[0]);
                    b.reposted(1);
                    moved = true;
                }
                if (!toA.isEmpty() && (r.nextBoolean() || !moved)) {
                    int[] f = toA.poll();
                    a.returned(f[0]);
                    a.reposted(1);
                    moved = true;
                }
                if (dataA == 0 && dataB == 0) {
                    emptyAfterData++;
                    assertTrue(emptyAfterData < 1_000, "empty frames keep echoing");
                }
                assertTrue(moved || dataA == 0 && dataB == 0, "stuck with data to send");
            }
        }
    }
}
