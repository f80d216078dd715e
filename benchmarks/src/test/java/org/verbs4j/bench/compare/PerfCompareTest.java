package org.verbs4j.bench.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.verbs4j.perf.BwReport;
import org.verbs4j.perf.PerfReporter;

/** The side-by-side report over the files perftest-compare.sh leaves: ratios, the JSON check, the plots. */
class PerfCompareTest {

    private static String run(PerfReporter rep, ByteArrayOutputStream buf, BwReport... rows) {
        rep.header(true, false);
        for (BwReport r : rows) {
            rep.bw(r, false);
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    @Test
    void ratioTableJsonCheckAndPlots(@TempDir Path dir) throws Exception {
        ByteArrayOutputStream pt = new ByteArrayOutputStream();
        PerfReporter ptRep = new PerfReporter(new PrintStream(pt, true, StandardCharsets.UTF_8));
        Files.writeString(
                dir.resolve("pt-pt__write_bw.out"),
                " TX depth        : 128\n"
                        + run(
                                ptRep,
                                pt,
                                new BwReport(4096, 5000, 110, 100, 0.0256),
                                new BwReport(65536, 5000, 220, 200, 0.0032)));
        ByteArrayOutputStream vp = new ByteArrayOutputStream();
        PerfReporter vpRep = new PerfReporter(new PrintStream(vp, true, StandardCharsets.UTF_8));
        vpRep.testInfo().put("test", "RDMA_Write_BW_Test");
        Files.writeString(
                dir.resolve("vp-vp__write_bw.out"),
                " TX depth        : 128\n"
                        + run(
                                vpRep,
                                vp,
                                new BwReport(4096, 5000, 110, 97, 0.0248),
                                new BwReport(65536, 5000, 220, 210, 0.00336)));
        vpRep.writeJson(dir.resolve("vp-vp__write_bw__all.json"));
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.run(
                new String[] {
                    dir.toString(), "--json", "--png", dir.resolve("img").toString()
                },
                new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("2 results parsed back, all match"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-vp\\s+4096\\s+100\\.0 MB/s\\s+97\\.000 MB/s\\s+0\\.97.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-vp\\s+65536\\s+200\\.0 MB/s\\s+210\\.0 MB/s\\s+1\\.05.*"), text);
        assertTrue(text.contains("TX depth=128"), text);
        assertTrue(Files.size(dir.resolve("img/perf-bw.png")) > 1000);

        // a JSON report that disagrees with the printed row fails the check
        Files.writeString(
                dir.resolve("vp-vp__write_bw__all.json"),
                "{\"test_info\":{\"test\":\"x\"},\"results\":[{\"MsgSize\":4096,\"BW_average\":55.0}]}");
        ByteArrayOutputStream again = new ByteArrayOutputStream();
        assertEquals(
                1,
                PerfCompare.run(
                        new String[] {dir.toString(), "--json"}, new PrintStream(again, true, StandardCharsets.UTF_8)));
        assertTrue(again.toString(StandardCharsets.UTF_8).contains("FAILED"));
    }

    @Test
    void perftestRepeatsGiveTheNoiseBandAndEachRowIsJudgedAgainstIt(@TempDir Path dir) throws Exception {
        writeBandAndVerbsPerf(dir);
        Files.writeString(dir.resolve("conditions.txt"), "warm runs before each measured run: 1\n");
        String text = compare(dir);
        assertTrue(text.contains("warm runs before each measured run: 1"), text);
        assertTrue(
                text.matches(
                        "(?s).*write_bw\\s+vp-pt\\s+4096\\s+102\\.0 MB/s\\s+97\\.000 MB/s\\s+0\\.95"
                                + "\\s+\\S+ Mpps\\s+\\S+ Mpps\\s+\\S+\\s+-6%\\.\\.\\+6%\\s+band \u00b16% wider than the difference: undecided\\n.*"),
                text);
        assertTrue(
                text.matches(
                        "(?s).*write_bw\\s+vp-pt\\s+65536\\s+.*-3%\\.\\.\\+3%\\s+slower \\(outside the band\\)\\n.*"),
                text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-vp\\s+4096\\s+.*\\s+faster \\(outside the band\\)\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-vp\\s+65536\\s+.*\\s+same within \u00b13%\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-pt\\.2\\s+4096\\s+.*\\(base\\)\\n.*"), text);
        assertTrue(
                text.contains("Within perftest's own noise: 2 of 4 rows; outside: write_bw pt-vp 4096 (1.07), "
                        + "write_bw vp-pt 65536 (0.95)"),
                text);
    }

    /** perftest twice (its band) and verbs-perf both ways: two of verbs-perf's four rows inside the band. */
    private static void writeBandAndVerbsPerf(Path dir) throws Exception {
        // perftest against itself twice: 100 and 104 MB/s at 4 KiB -> mean 102, band [96, 108]
        write(dir, "pt-pt", new BwReport(4096, 5000, 110, 100, 0.0256), new BwReport(65536, 5000, 220, 200, 0.0032));
        write(dir, "pt-pt.2", new BwReport(4096, 5000, 110, 104, 0.0266), new BwReport(65536, 5000, 220, 200, 0.0032));
        // 97 is inside; at 64 KiB the runs agree, so the band is the 3% floor: [194, 206], and 190 is below
        write(dir, "vp-pt", new BwReport(4096, 5000, 110, 97, 0.0248), new BwReport(65536, 5000, 220, 190, 0.00304));
        // 109 is above the band
        write(dir, "pt-vp", new BwReport(4096, 5000, 110, 109, 0.0279), new BwReport(65536, 5000, 220, 201, 0.00322));
    }

    /** The report of {@code PerfCompare dir}, which must exit 0. */
    private static String compare(Path dir) {
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.run(new String[] {dir.toString()}, new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        return text;
    }

    @Test
    void theControlIsJudgedByTheSameRuleAndCountedApart(@TempDir Path dir) throws Exception {
        writeBandAndVerbsPerf(dir); // the band as above: [96, 108] at 4 KiB, [194, 206] at 64 KiB
        // the control is not part of the band (else 64 KiB's band would widen to take in 180): 1 of 2 outside
        write(
                dir,
                "pt-pt.ctl",
                new BwReport(4096, 5000, 110, 101, 0.0258),
                new BwReport(65536, 5000, 220, 180, 0.0029));
        String text = compare(dir);
        // the base stays the mean of pt-pt and pt-pt.2: 102 and 200
        assertTrue(
                text.matches("(?s).*write_bw\\s+pt-pt\\.ctl\\s+65536\\s+200\\.0 MB/s\\s+180\\.0 MB/s\\s+0\\.90"
                        + ".*-3%\\.\\.\\+3%\\s+slower \\(outside the band\\)\\n.*"),
                text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-pt\\.ctl\\s+4096\\s+102\\.0 MB/s.*\\s+undecided\\n.*"), text);
        assertTrue(
                text.contains("Within perftest's own noise: 2 of 4 rows; outside: write_bw pt-vp 4096 (1.07), "
                        + "write_bw vp-pt 65536 (0.95)"),
                text);
        assertTrue(text.contains("~1.3 of these 4 rows are expected outside by chance alone"), text);
        assertTrue(
                text.contains(
                        "Direction: verbs-perf slower than perftest's mean in 2 of 4 rows (of the 2 outside the band, "
                                + "1 slower); sign test, two-sided: p = 1.000"),
                text);
        assertTrue(
                text.contains("the control: slower than perftest's mean in 2 of 2 rows (of the 1 outside, 1 slower)"),
                text);
        assertTrue(
                text.contains("The control (pt-pt.ctl, perftest against itself judged by the same rule): 1 of 2 rows "
                        + "within; outside: write_bw pt-pt.ctl 65536 (0.90)"),
                text);
        assertTrue(
                text.contains("Outside the band: verbs-perf 2 of 4 rows (50%), the control 1 of 2 (50%); "
                        + "one-sided Fisher exact test of the two shares: p = 0.800 (no evidence"),
                text);
    }

    @Test
    void fisherExactAgainstTheControl() {
        // reference values from the hypergeometric sums (math.comb)
        assertEquals(0.6466370415888482, CompareStats.fisherAtLeast(8, 28, 4, 14), 1e-12);
        assertEquals(0.4, CompareStats.fisherAtLeast(2, 4, 0, 2), 1e-12);
        assertEquals(0.008918531156694715, CompareStats.fisherAtLeast(10, 28, 0, 14), 1e-12);
        assertEquals(1.0, CompareStats.fisherAtLeast(0, 28, 5, 14), 1e-12);
        // sign test references (math.comb): 21 of 28 one way, 0 of 10, 3 of 4, an even split
        assertEquals(0.012540951371192932, CompareStats.signTest(21, 28), 1e-12);
        assertEquals(0.001953125, CompareStats.signTest(0, 10), 1e-12);
        assertEquals(0.625, CompareStats.signTest(3, 4), 1e-12);
        assertEquals(1.0, CompareStats.signTest(2, 4), 1e-12);
        assertTrue(PerfCompare.isControl("pt-pt.ctl", "pt-pt") && !PerfCompare.isBaseline("pt-pt.ctl", "pt-pt"));
        assertTrue(PerfCompare.isBaseline("pt-pt.2", "pt-pt") && !PerfCompare.isControl("pt-pt.2", "pt-pt"));
    }

    @Test
    void twoRunBandsMissOneRunInThreeOfAToolNoDifferentFromPerftest() {
        // the rule's false-alarm rate, simulated: three runs of one tool with normal noise, the third
        // judged against the band of the first two (no 3% floor: the noise here is 20%)
        java.util.Random rnd = new java.util.Random(42);
        int outside = 0, n = 200_000;
        for (int i = 0; i < n; i++) {
            double a = 1000 + 200 * rnd.nextGaussian(), b = 1000 + 200 * rnd.nextGaussian();
            double c = 1000 + 200 * rnd.nextGaussian();
            if (!CompareStats.Noise.of(List.of(a, b)).contains(c)) {
                outside++;
            }
        }
        assertEquals(CompareStats.TWO_RUN_FALSE_ALARM, outside / (double) n, 0.005);
    }

    @Test
    void repeatedRunsGiveEachPairItsBestRowAndEveryJsonReportMatchesOneOfThem(@TempDir Path dir) throws Exception {
        // --repeats 2: each file holds two runs per size, appended; perftest's runs alike
        write(dir, "pt-pt", new BwReport(4096, 5000, 110, 100, 0.0256), new BwReport(4096, 5000, 90, 80, 0.0205));
        write(dir, "pt-pt.2", new BwReport(4096, 5000, 110, 70, 0.0179), new BwReport(4096, 5000, 110, 104, 0.0266));
        ByteArrayOutputStream vp = new ByteArrayOutputStream();
        PerfReporter vpRep = new PerfReporter(new PrintStream(vp, true, StandardCharsets.UTF_8));
        vpRep.testInfo().put("test", "RDMA_Write_BW_Test");
        Files.writeString(
                dir.resolve("vp-pt__write_bw.out"),
                " TX depth        : 128\n"
                        + run(
                                vpRep,
                                vp,
                                new BwReport(4096, 5000, 80, 60, 0.0154),
                                new BwReport(4096, 5000, 110, 99, 0.0253)));
        vpRep.writeJson(dir.resolve("vp-pt__write_bw__4096.r2.json")); // holds both rows; each must match one
        PerfOutput parsed = PerfOutput.parse(Files.readString(dir.resolve("vp-pt__write_bw.out")));
        assertEquals(2, parsed.repeats());
        assertEquals(2, parsed.all().get(4096L).size());
        assertEquals(99.0, PerfOutput.bwAverage(parsed.rows().get(4096L)), 1e-9);
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.run(
                new String[] {dir.toString(), "--json"}, new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("2 results parsed back, all match"), text);
        assertTrue(text.contains("up to 2 times"), text);
        // base: perftest's bests 100 and 104 -> mean 102, band [96, 108] (widened by the range 4)
        assertTrue(
                text.matches(
                        "(?s).*write_bw\\s+vp-pt\\s+4096\\s+102\\.0 MB/s\\s+99\\.000 MB/s\\s+0\\.97"
                                + "\\s+\\S+ Mpps\\s+\\S+ Mpps\\s+\\S+\\s+-6%\\.\\.\\+6%\\s+band \u00b16% wider than the difference: undecided\\n.*"),
                text);

        // a latency run keeps its lowest t_typical; a run perftest could not report (inf) is never the best
        PerfOutput lat = PerfOutput.parse("""
                 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
                 2       200          9.0          90.0      inf  12.0  1.0  30.0  40.0
                 2       200          9.0          90.0      11.5  12.0  1.0  31.0  40.0
                 2       200          9.0          90.0      17.5  18.0  1.0  32.0  40.0
                ---------------------------------------------------------------------------------------
                """);
        assertEquals(3, lat.repeats());
        assertEquals(11.5, PerfOutput.tTypical(lat.rows().get(2L)), 1e-9);
        assertEquals(31.0, PerfOutput.p99(lat.rows().get(2L)), 1e-9);
    }

    @Test
    void everyRunIsPairedWithPerftestsRunsOfTheSameRepeat(@TempDir Path dir) throws Exception {
        // four repeats whose speed swings by 2x from one repeat to the next, on both tools alike; the
        // verbs-perf client is 10% slower than perftest's mean in every repeat, the verbs-perf server
        // as fast; every row is still within perftest's band (its runs differ by 10%)
        double[] swing = {100, 200, 120, 60};
        BwReport[] ptA = new BwReport[4], ptB = new BwReport[4], vpPt = new BwReport[4], ptVp = new BwReport[4];
        for (int k = 0; k < 4; k++) {
            double a = swing[k] * 0.95, b = swing[k] * 1.05;
            double mean = Math.sqrt(a * b);
            ptA[k] = new BwReport(4096, 5000, 0, a, a / 4096);
            ptB[k] = new BwReport(4096, 5000, 0, b, b / 4096);
            vpPt[k] = new BwReport(4096, 5000, 0, mean * 0.9, mean * 0.9 / 4096);
            ptVp[k] = new BwReport(4096, 5000, 0, mean, mean / 4096);
        }
        write(dir, "pt-pt", ptA);
        write(dir, "pt-pt.2", ptB);
        write(dir, "vp-pt", vpPt);
        write(dir, "pt-vp", ptVp);
        write(
                dir,
                "pt-pt.ctl",
                ptVp); // the control, as fast as perftest's mean: paired like a candidate, not as a repeat
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.run(new String[] {dir.toString()}, new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        // the best rows (200 against 200 x 0.9) are judged one by one; the pairing sees the 10% in every repeat
        assertTrue(
                text.matches("(?s).*\\n  vp-pt\\s+bandwidth 0\\.900 \\(0\\.900\\.\\.0\\.900, 4 runs\\)  slower\\n.*"),
                text);
        assertTrue(text.matches("(?s).*\\n  pt-vp\\s+bandwidth 1\\.000 \\(1\\.000\\.\\.1\\.000, 4 runs\\)\\n.*"), text);
        assertTrue(
                text.matches("(?s).*\\n  pt-pt\\.ctl\\s+bandwidth 1\\.000 \\(1\\.000\\.\\.1\\.000, 4 runs\\)\\n.*"),
                text);
        assertTrue(!text.contains("pt-pt.ctl against"), text);
        // perftest's repeat against perftest's own run of the same repeat: 1.05 / 0.95 each time
        assertTrue(text.matches("(?s).*\\n  pt-pt\\.2 against pt-pt\\s+bandwidth 1\\.105 .*"), text);

        // a latency pair: t_typical 25% longer in every run is a speed of 0.8; spread gives an interval around it
        List<PerfCompare.Run> lat = new java.util.ArrayList<>();
        double[] base = {10, 30, 12, 20, 15};
        double[] noise = {1.0, 1.1, 0.9, 1.05, 0.95};
        StringBuilder pt = new StringBuilder(LAT_HEADER), vp = new StringBuilder(LAT_HEADER);
        for (int k = 0; k < base.length; k++) {
            pt.append(latRow(base[k]));
            vp.append(latRow(base[k] * 1.25 * noise[k]));
        }
        lat.add(new PerfCompare.Run("pt-pt", "write_lat", PerfOutput.parse(pt.toString())));
        lat.add(new PerfCompare.Run("vp-pt", "write_lat", PerfOutput.parse(vp.toString())));
        List<CompareStats.Paired> p = PerfCompare.paired(lat, "pt-pt");
        assertEquals(1, p.size(), p.toString());
        assertEquals("vp-pt", p.getFirst().pair());
        assertEquals(false, p.getFirst().bandwidth());
        assertEquals(5, p.getFirst().n());
        double gm = 1 / (1.25 * Math.pow(1.0 * 1.1 * 0.9 * 1.05 * 0.95, 1 / 5.0));
        assertEquals(gm, p.getFirst().ratio(), 1e-9);
        assertTrue(
                p.getFirst().lo() < gm && gm < p.getFirst().hi() && p.getFirst().hi() < 1.0, p.toString());
        // fewer than three runs: no estimate
        assertEquals(
                List.of(),
                PerfCompare.paired(
                        List.of(
                                lat.get(0),
                                new PerfCompare.Run(
                                        "vp-pt", "write_lat", PerfOutput.parse(LAT_HEADER + latRow(12) + latRow(13)))),
                        "pt-pt"));
        // Student's t: 12.706 at 1 degree of freedom is beyond the expansion; 3.182 at 3, 2.262 at 9, 2.042 at 30
        assertEquals(3.182, CompareStats.tQuantile975(3), 0.03);
        assertEquals(2.262, CompareStats.tQuantile975(9), 0.005);
        assertEquals(2.042, CompareStats.tQuantile975(30), 0.002);
    }

    private static final String LAT_HEADER =
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
                    + "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\n";

    private static String latRow(double typical) {
        return String.format(
                java.util.Locale.ROOT,
                " 2       200          1.0          90.0      %.4f  %.4f  1.0  30.0  40.0%n",
                typical,
                typical);
    }

    @Test
    void smallRatesKeepThreeSignificantDigits() {
        assertEquals("0.000376 Mpps", PerfCompare.fmt(0.000376, " Mpps"));
        assertEquals("0.0256 Mpps", PerfCompare.fmt(0.0256, " Mpps"));
        assertEquals("0.000 Mpps", PerfCompare.fmt(0, " Mpps"));
        assertEquals("97.000 MB/s", PerfCompare.fmt(97, " MB/s"));
        assertEquals("1234.5 MB/s", PerfCompare.fmt(1234.5, " MB/s"));
        assertEquals("?", PerfCompare.fmt(Double.NaN, " us"));
    }

    @Test
    void aRowInsideABandWiderThanTheDifferenceIsUndecidedNotWithinNoise() {
        CompareStats.Noise narrow = CompareStats.Noise.of(List.of(100.0, 100.0)); // [97, 103]
        CompareStats.Noise wide = CompareStats.Noise.of(List.of(90.0, 110.0)); // [70, 130]
        assertEquals(0.03, narrow.halfWidth(), 1e-9);
        assertEquals(0.30, wide.halfWidth(), 1e-9);
        assertEquals("same within \u00b13%", PerfCompare.verdict(narrow, 101, true));
        assertEquals("band \u00b130% wider than the difference: undecided", PerfCompare.verdict(wide, 95, true));
        assertEquals("band \u00b130% wider than the difference: undecided", PerfCompare.verdict(wide, 125, false));
        // outside: below the band is slower for bandwidth, faster for latency (t_typical)
        assertEquals("slower (outside the band)", PerfCompare.verdict(narrow, 96, true));
        assertEquals("faster (outside the band)", PerfCompare.verdict(narrow, 96, false));
        assertEquals("faster (outside the band)", PerfCompare.verdict(wide, 131, true));
        assertEquals("slower (outside the band)", PerfCompare.verdict(wide, 131, false));
        assertEquals("?", PerfCompare.verdict(null, 100, true));
        assertEquals("?", PerfCompare.verdict(narrow, Double.NaN, true));
    }

    @Test
    void noiseBandNeedsTwoRunsAndIsAtLeastTheFloor() {
        assertEquals(null, CompareStats.Noise.of(java.util.List.of(100.0)));
        assertEquals(null, CompareStats.Noise.of(java.util.List.of(100.0, Double.NaN)));
        CompareStats.Noise same = CompareStats.Noise.of(java.util.List.of(100.0, 100.0));
        assertEquals(97.0, same.lo(), 1e-9);
        assertEquals(103.0, same.hi(), 1e-9);
        CompareStats.Noise wide = CompareStats.Noise.of(java.util.List.of(90.0, 110.0, 100.0));
        assertEquals(70.0, wide.lo(), 1e-9);
        assertEquals(130.0, wide.hi(), 1e-9);
        assertTrue(wide.contains(70.0) && !wide.contains(69.9) && !wide.contains(130.1));
    }

    private static void write(Path dir, String pair, BwReport... rows) throws Exception {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PerfReporter rep = new PerfReporter(new PrintStream(buf, true, StandardCharsets.UTF_8));
        Files.writeString(dir.resolve(pair + "__write_bw.out"), " TX depth        : 128\n" + run(rep, buf, rows));
    }
}
