package org.verbs4j.bench.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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
        Files.writeString(dir.resolve("pt-pt__write_bw.out"), " TX depth        : 128\n" + run(ptRep, pt,
                new BwReport(4096, 5000, 110, 100, 0.0256), new BwReport(65536, 5000, 220, 200, 0.0032)));
        ByteArrayOutputStream vp = new ByteArrayOutputStream();
        PerfReporter vpRep = new PerfReporter(new PrintStream(vp, true, StandardCharsets.UTF_8));
        vpRep.testInfo().put("test", "RDMA_Write_BW_Test");
        Files.writeString(dir.resolve("vp-vp__write_bw.out"), " TX depth        : 128\n" + run(vpRep, vp,
                new BwReport(4096, 5000, 110, 97, 0.0248), new BwReport(65536, 5000, 220, 210, 0.00336)));
        vpRep.writeJson(dir.resolve("vp-vp__write_bw__all.json"));
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.main(new String[] {dir.toString(), "--json", "--png", dir.resolve("img").toString()},
                new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("2 results parsed back, all match"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-vp\\s+4096\\s+100\\.0 MB/s\\s+97\\.000 MB/s\\s+0\\.97.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-vp\\s+65536\\s+200\\.0 MB/s\\s+210\\.0 MB/s\\s+1\\.05.*"), text);
        assertTrue(text.contains("TX depth=128"), text);
        assertTrue(Files.size(dir.resolve("img/perf-bw.png")) > 1000);

        // a JSON report that disagrees with the printed row fails the check
        Files.writeString(dir.resolve("vp-vp__write_bw__all.json"),
                "{\"test_info\":{\"test\":\"x\"},\"results\":[{\"MsgSize\":4096,\"BW_average\":55.0}]}");
        ByteArrayOutputStream again = new ByteArrayOutputStream();
        assertEquals(1, PerfCompare.main(new String[] {dir.toString(), "--json"},
                new PrintStream(again, true, StandardCharsets.UTF_8)));
        assertTrue(again.toString(StandardCharsets.UTF_8).contains("FAILED"));
    }

    @Test
    void perftestRepeatsGiveTheNoiseBandAndEachRowIsJudgedAgainstIt(@TempDir Path dir) throws Exception {
        // perftest against itself twice: 100 and 104 MB/s at 4 KiB -> mean 102, band [96, 108]
        write(dir, "pt-pt", new BwReport(4096, 5000, 110, 100, 0.0256), new BwReport(65536, 5000, 220, 200, 0.0032));
        write(dir, "pt-pt.2", new BwReport(4096, 5000, 110, 104, 0.0266), new BwReport(65536, 5000, 220, 200, 0.0032));
        // 97 is inside; at 64 KiB the runs agree, so the band is the 3% floor: [194, 206], and 190 is below
        write(dir, "vp-pt", new BwReport(4096, 5000, 110, 97, 0.0248), new BwReport(65536, 5000, 220, 190, 0.00304));
        // 109 is above the band
        write(dir, "pt-vp", new BwReport(4096, 5000, 110, 109, 0.0279), new BwReport(65536, 5000, 220, 201, 0.00322));
        Files.writeString(dir.resolve("conditions.txt"), "warm runs before each measured run: 1\n");
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.main(new String[] {dir.toString()}, new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("warm runs before each measured run: 1"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-pt\\s+4096\\s+102\\.0 MB/s\\s+97\\.000 MB/s\\s+0\\.95"
                + "\\s+\\S+ Mpps\\s+\\S+ Mpps\\s+\\S+\\s+-6%\\.\\.\\+6%\\s+yes\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+vp-pt\\s+65536\\s+.*-3%\\.\\.\\+3%\\s+no, below\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-vp\\s+4096\\s+.*\\s+no, above\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-vp\\s+65536\\s+.*\\s+yes\\n.*"), text);
        assertTrue(text.matches("(?s).*write_bw\\s+pt-pt\\.2\\s+4096\\s+.*\\(base\\)\\n.*"), text);
        assertTrue(text.contains("Within perftest's own noise: 2 of 4 rows; outside: write_bw pt-vp 4096 (1.07), "
                + "write_bw vp-pt 65536 (0.95)"), text);
    }

    @Test
    void repeatedRunsGiveEachPairItsBestRowAndEveryJsonReportMatchesOneOfThem(@TempDir Path dir) throws Exception {
        // --repeats 2: each file holds two runs per size, appended; perftest's runs alike
        write(dir, "pt-pt", new BwReport(4096, 5000, 110, 100, 0.0256), new BwReport(4096, 5000, 90, 80, 0.0205));
        write(dir, "pt-pt.2", new BwReport(4096, 5000, 110, 70, 0.0179), new BwReport(4096, 5000, 110, 104, 0.0266));
        ByteArrayOutputStream vp = new ByteArrayOutputStream();
        PerfReporter vpRep = new PerfReporter(new PrintStream(vp, true, StandardCharsets.UTF_8));
        vpRep.testInfo().put("test", "RDMA_Write_BW_Test");
        Files.writeString(dir.resolve("vp-pt__write_bw.out"), " TX depth        : 128\n" + run(vpRep, vp,
                new BwReport(4096, 5000, 80, 60, 0.0154), new BwReport(4096, 5000, 110, 99, 0.0253)));
        vpRep.writeJson(dir.resolve("vp-pt__write_bw__4096.r2.json")); // holds both rows; each must match one
        PerfOutput parsed = PerfOutput.parse(Files.readString(dir.resolve("vp-pt__write_bw.out")));
        assertEquals(2, parsed.repeats());
        assertEquals(2, parsed.all().get(4096L).size());
        assertEquals(99.0, PerfOutput.bwAverage(parsed.rows().get(4096L)), 1e-9);
        ByteArrayOutputStream report = new ByteArrayOutputStream();
        int rc = PerfCompare.main(new String[] {dir.toString(), "--json"}, new PrintStream(report, true, StandardCharsets.UTF_8));
        String text = report.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("2 results parsed back, all match"), text);
        assertTrue(text.contains("up to 2 times"), text);
        // base: perftest's bests 100 and 104 -> mean 102, band [96, 108] (widened by the range 4)
        assertTrue(text.matches("(?s).*write_bw\\s+vp-pt\\s+4096\\s+102\\.0 MB/s\\s+99\\.000 MB/s\\s+0\\.97"
                + "\\s+\\S+ Mpps\\s+\\S+ Mpps\\s+\\S+\\s+-6%\\.\\.\\+6%\\s+yes\\n.*"), text);

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
    void noiseBandNeedsTwoRunsAndIsAtLeastTheFloor() {
        assertEquals(null, PerfCompare.Noise.of(java.util.List.of(100.0)));
        assertEquals(null, PerfCompare.Noise.of(java.util.List.of(100.0, Double.NaN)));
        PerfCompare.Noise same = PerfCompare.Noise.of(java.util.List.of(100.0, 100.0));
        assertEquals(97.0, same.lo(), 1e-9);
        assertEquals(103.0, same.hi(), 1e-9);
        PerfCompare.Noise wide = PerfCompare.Noise.of(java.util.List.of(90.0, 110.0, 100.0));
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
