package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PerfResultsTest {

    @Test
    void latencyAsPerftestComputesIt() {
        // 11 posts 1 us apart except two slow gaps (dropped as perftest's tail): 10 deltas, 8 kept
        long[] t = new long[11];
        long[] gaps = {1000, 1000, 50_000, 1000, 1000, 2000, 1000, 1000, 90_000, 1000};
        for (int i = 1; i < t.length; i++) {
            t[i] = t[i - 1] + gaps[i - 1];
        }
        LatReport r = LatReport.of(2, 11, t, 2);
        assertEquals(0.5, r.tMin(), 1e-9);
        assertEquals(25.0, r.tMax(), 1e-9, "t_max is the second largest delta, as perftest's delta[measure_cnt]");
        assertEquals(0.5, r.tTypical(), 0.001);
        assertEquals((7 * 1000 + 2000) / 8.0 / 2000, r.tAvg(), 1e-9);
        assertEquals(1.0, r.p99(), 0.001);
    }

    @Test
    void bandwidthAverageAndPeak() {
        int n = 4;
        long[] posted = {0, 100, 200, 300};
        long[] completed = {0, 1_000_000, 0, 2_000_000}; // cq mod 2: completions of requests 1 and 3
        BwReport r = BwCalc.client(1 << 20, n, posted, completed, 2, 1, false);
        assertEquals(4 / 0.002, r.bwAverage(), 1e-6); // 4 MiB in 2 ms
        assertEquals(4 / 0.002 / 1e6, r.msgRate(), 1e-9);
        assertTrue(r.bwPeak() >= r.bwAverage());
    }

    @Test
    void jsonHasPerftestsFields(@TempDir Path dir) throws Exception {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PerfReporter rep = new PerfReporter(new PrintStream(buf, true, StandardCharsets.UTF_8));
        rep.testInfo().put("test", "RDMA_Write_BW_Test");
        rep.header(true, false);
        rep.bw(new BwReport(4096, 5000, 1234.5678, 1000.25, 0.256064), false);
        rep.bw(new BwReport(65536, 5000, 2234.5, 2000.75, 0.032012), false);
        Path f = dir.resolve("out.json");
        rep.writeJson(f);
        JsonNode root = new ObjectMapper().readTree(Files.readString(f));
        assertEquals("RDMA_Write_BW_Test", root.path("test_info").path("test").asText());
        JsonNode first = root.path("results").get(0);
        for (String k : new String[] {"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}) {
            assertTrue(first.has(k), k);
        }
        assertEquals(1234.57, first.path("BW_peak").asDouble(), 1e-9);
    }
}
