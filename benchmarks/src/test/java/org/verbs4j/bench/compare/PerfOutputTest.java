package org.verbs4j.bench.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.verbs4j.perf.BwReport;
import org.verbs4j.perf.PerfReporter;

/** Parsing either tool's output: verbs-perf's printed columns, and perftest's own. */
class PerfOutputTest {

    @Test
    void verbsPerfsPrintedColumnsParseBack() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PerfReporter rep = new PerfReporter(new PrintStream(buf, true, StandardCharsets.UTF_8));
        rep.header(true, false);
        rep.bw(new BwReport(4096, 5000, 1234.5678, 1000.25, 0.256064), false);
        rep.bw(new BwReport(65536, 5000, 2234.5, 2000.75, 0.032012), false);
        PerfOutput parsed = PerfOutput.parse(buf.toString(StandardCharsets.UTF_8));
        assertTrue(parsed.bandwidth());
        assertEquals(1000.25, PerfOutput.bwAverage(parsed.rows().get(4096L)), 1e-9);
        assertEquals(0.032012, PerfOutput.msgRate(parsed.rows().get(65536L)), 1e-9);
    }

    @Test
    void parsesPerftestsOwnOutput() {
        String perftest = """
                ---------------------------------------------------------------------------------------
                                    RDMA_Write Latency Test
                 Dual-port       : OFF\t\tDevice         : rxe0
                 Number of qps   : 1\t\tTransport type : IB
                 Connection type : RC\t\tUsing SRQ      : OFF
                 TX depth        : 1
                 Mtu             : 1024[B]
                 Max inline data : 0[B]
                ---------------------------------------------------------------------------------------
                 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]\s
                 2       200          90.53          189424.39      3351.89  \t       7858.05     \t7045.83\t\t109699.30 \t\t189424.39
                ---------------------------------------------------------------------------------------
                """;
        PerfOutput p = PerfOutput.parse(perftest);
        assertEquals("rxe0", p.params().get("Device"));
        assertEquals("1", p.params().get("TX depth"));
        assertEquals("0[B]", p.params().get("Max inline data"));
        assertEquals(3351.89, PerfOutput.tTypical(p.rows().get(2L)), 1e-9);
        assertEquals(109699.30, PerfOutput.p99(p.rows().get(2L)), 1e-9);
    }
}
