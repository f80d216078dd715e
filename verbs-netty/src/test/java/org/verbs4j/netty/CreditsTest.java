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
    void aFrameBeyondTheCreditsGrantedIsRefused() throws Exception {
        Credits c = new Credits(4, 6);
        for (int i = 0; i < 6; i++) {
            c.frameArrived(); // the six buffers granted at the start
        }
        c.reposted(2);
        assertEquals(2, c.spend(), "two credits go back to the peer");
        c.frameArrived();
        c.frameArrived();
        ProtocolViolationException e = assertThrows(ProtocolViolationException.class, c::frameArrived);
        assertTrue(e.getMessage().contains("frame 9 but was granted only 8 credits"), e.getMessage());
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
            int dataB = round % 2 == 0 ? 0 : r.nextInt(500);
            assertTrue(exchange(r, ra, rb, r.nextInt(500), dataB, 0, 0), "stuck with data to send");
        }
    }

    /**
     * Zero-copy reads: each receiver keeps up to {@link Credits#maxHeld} data frames' buffers and
     * never releases them (a handler that holds what it read); every data frame still gets
     * through, both ways and one way. One buffer more held and one-way traffic stops: the bound is
     * what keeps the credit-frame rule live.
     */
    @Test
    void buffersHeldUpToTheBoundNeverStopThePeer() throws Exception {
        Random r = new Random(11);
        for (int round = 0; round < 200; round++) {
            int ra = 4 + r.nextInt(13), rb = 4 + r.nextInt(13);
            int dataB = round % 2 == 0 ? 0 : r.nextInt(500);
            assertTrue(
                    exchange(r, ra, rb, 50 + r.nextInt(500), dataB, Credits.maxHeld(ra), Credits.maxHeld(rb)),
                    "stuck with data to send (" + ra + " and " + rb + " receive buffers)");
        }
        for (int rb = 4; rb <= 16; rb++) {
            assertFalse(exchange(r, 8, rb, 500, 0, 0, Credits.maxHeld(rb) + 1), "one more held, " + rb + " buffers");
        }
    }

    /**
     * Runs the two ledgers until every data frame arrived: side A sends {@code dataA} frames and
     * keeps the buffers of the first {@code holdA} data frames it receives for ever (B likewise).
     *
     * @return true once everything arrived; false when no step can move while data is left
     */
    private static boolean exchange(Random r, int ra, int rb, int dataA, int dataB, int holdA, int holdB)
            throws ProtocolViolationException {
        Credits a = new Credits(rb, ra), b = new Credits(ra, rb);
        ArrayDeque<int[]> toB = new ArrayDeque<>(), toA = new ArrayDeque<>(); // {returned, isData}
        int steps = 0, emptyAfterData = 0;
        while (dataA > 0 || dataB > 0 || !toA.isEmpty() || !toB.isEmpty()) {
            assertTrue(++steps < 100_000, "no end: frames keep moving");
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
                holdB = arrive(b, toB.poll(), holdB);
                moved = true;
            }
            if (!toA.isEmpty() && (r.nextBoolean() || !moved)) {
                holdA = arrive(a, toA.poll(), holdA);
                moved = true;
            }
            if (dataA == 0 && dataB == 0) {
                emptyAfterData++;
                assertTrue(emptyAfterData < 1_000, "empty frames keep echoing");
            }
            if (!moved && (dataA > 0 || dataB > 0)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Frame {@code f} arrives at {@code c}: its credits come back, and its buffer is reposted
     * unless it is a data frame the application keeps ({@code hold} more to keep).
     *
     * @return the frames still to keep
     */
    private static int arrive(Credits c, int[] f, int hold) throws ProtocolViolationException {
        c.frameArrived(); // an honest peer never passes its grant
        c.returned(f[0]);
        if (f[1] == 1 && hold > 0) {
            return hold - 1; // kept: never reposted
        }
        c.reposted(1);
        return hold;
    }
}
