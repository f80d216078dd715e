package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The options {@code -q}, {@code -b}, {@code -D}, {@code -f}: parsing, perftest's refusals, and the duration clock. */
class PerfModesTest {
    private static PerfOptions parse(String... args) {
        PerfOptions o = new PerfOptions();
        new CommandLine(o).parseArgs(args);
        return o;
    }

    private static String refused(String... args) {
        return assertThrows(IllegalArgumentException.class, () -> parse(args).resolve("rxe0"))
                .getMessage();
    }

    @Test
    void multipleQpsOnBandwidthTests() {
        PerfOptions o = parse("write_bw", "-q", "4", "-n", "1000", "host").resolve("rxe0");
        assertEquals(4, o.qps);
        assertEquals(1000, o.iterations, "-n counts per QP, as perftest");
        assertEquals(8, parse("send_bw", "--qp=8").resolve("rxe0").qps);
        assertTrue(refused("write_lat", "-q", "2").contains("bw tests"), "perftest: multiple QPs only on bw tests");
        assertTrue(refused("write_bw", "-q", "0").contains("-q must be"));
        assertTrue(refused("write_bw", "-q", "16385").contains("16384"));
        assertTrue(
                refused("write_bw", "-q", "1000", "-n", "1000000").contains("10^8"),
                "timestamps of n x QPs are bounded");
    }

    @Test
    void bidirectionalOnBandwidthTests() {
        assertTrue(parse("write_bw", "-b").resolve("rxe0").bidirectional);
        assertTrue(parse("send_bw", "--bidirectional", "host").resolve("rxe0").bidirectional);
        assertTrue(refused("send_lat", "-b").contains("BW tests"));
        assertTrue(refused("read_lat", "-b").contains("BW tests"));
    }

    @Test
    void durationMode() {
        PerfOptions o = parse("write_bw", "-D", "4", "-t", "64").resolve("rxe0");
        assertEquals(4, o.duration);
        assertEquals(0, o.iterations, "no iteration count in duration mode (perftest sets it to 0)");
        assertEquals(64, o.tx, "the tx depth is not bounded by an iteration count");
        assertEquals(1, PerfModes.margin(o), "perftest's margin: a quarter of the duration");
        assertEquals(0, PerfModes.margin(parse("write_bw", "-D", "3").resolve("rxe0")));
        assertEquals(
                2, PerfModes.margin(parse("write_bw", "-D", "10", "-f", "2").resolve("rxe0")));
        assertTrue(refused("write_bw", "-D", "2", "-n", "100").contains("-n"));
        assertTrue(refused("write_bw", "-D", "2", "-a").contains("all sizes"));
        assertTrue(refused("write_lat", "-D", "2").contains("bandwidth tests"));
        assertTrue(refused("write_bw", "-D", "0").contains("positive"));
        assertTrue(refused("write_bw", "-D", "4", "-f", "2").contains("DURATION > 2*MARGIN"));
        assertTrue(refused("write_bw", "-f", "1").contains("-D"));
        assertNull(PerfModes.duration(parse("write_bw").resolve("rxe0")), "iterations mode has no clock");
    }

    @Test
    void durationClockSamplesBetweenTheMargins() {
        long s = 1_000_000_000L;
        PerfDuration d = new PerfDuration(4, 1);
        assertFalse(d.started());
        assertFalse(d.ended(0, 0), "not started: never ends");
        d.start(100);
        assertFalse(d.ended(100 + s / 2, 50), "warm-up margin");
        assertFalse(d.ended(100 + s, 100), "the sample period starts at count 100");
        assertFalse(d.ended(100 + 2 * s, 300));
        assertFalse(d.ended(100 + 3 * s, 500), "the sample period ends at count 500");
        assertFalse(d.ended(100 + 3 * s + s / 2, 600), "closing margin: not counted");
        assertTrue(d.ended(100 + 4 * s, 700));
        assertEquals(400, d.sampled());
        assertEquals(2 * s, d.sampleNanos());
        BwReport r = d.report(1 << 20, false);
        assertEquals(400, r.iterations());
        assertEquals(200.0, r.bwAverage(), 1e-9, "400 MiB in 2 s");
        assertEquals(0.0, r.bwPeak(), "perftest reports no peak in duration mode");
        assertEquals(200.0 / 1e6, r.msgRate(), 1e-12);
    }

    @Test
    void zeroMarginSamplesTheWholeDuration() {
        long s = 1_000_000_000L;
        PerfDuration d = new PerfDuration(2, 0);
        d.start(0);
        assertFalse(d.ended(1, 7), "the sample starts at once");
        assertTrue(d.ended(2 * s + 5, 900), "and the end follows the sample at once");
        assertEquals(893, d.sampled());
        assertEquals(2 * s + 4, d.sampleNanos());
        assertThrows(IllegalArgumentException.class, () -> new PerfDuration(2, 1));
    }

    @Test
    void workRequestIdsCarryTheirQueuePair() {
        long id = PerfSide.wrId(3, 123_456_789_012L);
        assertEquals(3, (int) (id >>> PerfSide.QP_SHIFT));
        assertEquals(123_456_789_012L, id & PerfSide.INDEX_MASK);
        assertEquals(41, PerfSide.wrId(0, 41), "QP 0's ids are the plain indexes (the latency loops')");
    }

    @Test
    void bidirectionalReportIsTheSumWithOwnIterations() {
        BwReport sum = PerfModes.sum(new BwReport(4096, 200, 10, 8, 0.5), new BwReport(4096, 300, 1, 2, 0.25));
        assertEquals(new BwReport(4096, 200, 11, 10, 0.75), sum);
        assertEquals(
                "RDMA_Write Bidirectional BW Test", PerfModes.title(PerfTest.WRITE_BW.title("FETCH_AND_ADD"), true));
        assertEquals("Send BW Test", PerfModes.title(PerfTest.SEND_BW.title("FETCH_AND_ADD"), false));
        assertEquals(
                "ATOMIC_FETCH_AND_ADD_Bidirectional_BW_Test",
                PerfModes.jsonTitle(PerfTest.ATOMIC_BW.jsonName("FETCH_AND_ADD"), true));
    }
}
