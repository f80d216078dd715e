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
}
