package org.verbs4j.bench.perf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class PerfOptionsTest {
    private static PerfOptions parse(String... args) {
        PerfOptions o = new PerfOptions();
        new CommandLine(o).parseArgs(args);
        return o;
    }

    @Test
    void perftestDefaultsPerTest() {
        PerfOptions bw = parse("write_bw").resolve("rxe0");
        assertEquals(5000, bw.iterations);
        assertArrayEquals(new int[] {65536}, bw.sizes);
        assertEquals(128, bw.tx);
        assertEquals(1, bw.cq, "perftest turns CQ moderation off above 8 KiB");
        assertEquals(0, bw.inline);
        assertTrue(bw.server());
        PerfOptions bw4k = parse("write_bw", "-s", "4096", "host").resolve("rxe0");
        assertEquals(100, bw4k.cq);
        assertEquals("host", bw4k.host);
        PerfOptions lat = parse("write_lat").resolve("mlx5_0");
        assertEquals(1000, lat.iterations);
        assertArrayEquals(new int[] {2}, lat.sizes);
        assertEquals(1, lat.tx);
        assertEquals(220, lat.inline);
        assertEquals(236, parse("send_lat").resolve("mlx5_0").inline);
        assertEquals(0, parse("send_lat").resolve("rxe0").inline, "perftest disables inline on unknown devices");
        assertArrayEquals(new int[] {8}, parse("atomic_lat").resolve("rxe0").sizes);
    }

    @Test
    void perftestsOptionNames() {
        PerfOptions o = parse("read_bw", "-d", "rxe0", "-i", "1", "-x", "1", "-s", "4096", "-n", "100", "-t", "64", "-Q", "8",
                "-l", "1", "-I", "0", "-q", "1", "-c", "RC", "-m", "1024", "-p", "18516", "-F", "--report_gbits",
                "--out_json", "--out_json_file=x.json", "-o", "4", "10.0.0.1").resolve("rxe0");
        assertEquals(64, o.tx);
        assertEquals(8, o.cq);
        assertEquals(18516, o.tcpPort);
        assertEquals("x.json", o.outJsonFile);
        assertTrue(o.reportGbits && o.outJson);
        PerfOptions all = parse("write_bw", "-a").resolve("rxe0");
        assertEquals(23, all.sizes.length);
        assertEquals(1 << 23, all.sizes[22]);
        assertEquals(100, all.cq, "no CQ moderation change with -a");
    }

    @Test
    void notYetAvailableOptionsSayWhy() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> parse("write_bw", "-R", "-c", "UC", "host")
                .resolve("rxe0")).getMessage().contains("librdmacm"));
        assertTrue(parse("write_bw", "-R", "host").resolve("rxe0").rdmaCm, "-R is accepted for RC");
        assertTrue(assertThrows(IllegalArgumentException.class, () -> parse("write_lat", "--use_cuda", "0")
                .resolve("rxe0")).getMessage().contains("CPU"), "latency tests poll the buffer with the CPU");
        assertThrows(IllegalArgumentException.class, () -> parse("atomic_bw", "--use_cuda", "0").resolve("rxe0"));
        assertThrows(IllegalArgumentException.class, () -> parse("send_bw", "--use_cuda", "0", "-I", "64").resolve("rxe0"));
        assertThrows(IllegalArgumentException.class, () -> parse("write_bw", "--use_cuda_dmabuf").resolve("rxe0"));
        assertEquals(0, parse("send_bw", "--use_cuda=1", "--use_cuda_dmabuf").resolve("rxe0").inline);
        assertThrows(IllegalArgumentException.class, () -> parse("read_bw", "-c", "UC").resolve("rxe0"));
        assertThrows(IllegalArgumentException.class, () -> parse("atomic_bw", "-s", "16").resolve("rxe0"));
        assertThrows(IllegalArgumentException.class, () -> parse("nonsense").resolve("rxe0"));
    }

    @Test
    void helpIsGeneratedFromTheOptions() {
        StringWriter sw = new StringWriter();
        new CommandLine(new PerfOptions()).usage(new PrintWriter(sw));
        String help = sw.toString();
        for (String opt : new String[] {"--ib-dev", "--gid-index", "--size", "--all", "--iters", "--duration", "--tx-depth",
            "--cq-mod", "--post_list", "--inline_size", "--qp", "--connection", "--mtu", "--port", "--CPU-freq",
            "--rdma_cm", "--report_gbits", "--out_json", "--out_json_file", "--bidirectional", "--use_cuda"}) {
            assertTrue(help.contains(opt), opt + " in --help");
        }
    }
}
