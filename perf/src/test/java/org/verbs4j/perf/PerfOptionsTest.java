package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
        PerfOptions o = parse(
                        "read_bw",
                        "-d",
                        "rxe0",
                        "-i",
                        "1",
                        "-x",
                        "1",
                        "-s",
                        "4096",
                        "-n",
                        "100",
                        "-t",
                        "64",
                        "-Q",
                        "8",
                        "-l",
                        "1",
                        "-I",
                        "0",
                        "-q",
                        "1",
                        "-c",
                        "RC",
                        "-m",
                        "1024",
                        "-p",
                        "18516",
                        "-F",
                        "--report_gbits",
                        "--out_json",
                        "--out_json_file=x.json",
                        "-o",
                        "4",
                        "10.0.0.1")
                .resolve("rxe0");
        assertEquals(64, o.tx);
        assertEquals(8, o.cq);
        assertEquals(18516, o.tcpPort);
        assertEquals("x.json", o.outJsonFile);
        assertTrue(o.reportGbits && o.outJson);
        PerfOptions all = parse("write_bw", "-a").resolve("rxe0");
        assertEquals(23, all.sizes.length);
        assertEquals(1 << 23, all.sizes[22]);
        assertEquals(100, all.cq, "no CQ moderation change with -a");
        assertEquals(14, all.qpTimeout, "perftest's default ACK timeout (67 ms)");
        assertEquals(18, parse("send_bw", "-u", "18").resolve("rxe0").qpTimeout);
        assertEquals(20, parse("send_bw", "--qp-timeout=20").resolve("rxe0").qpTimeout);
        assertTrue(assertThrows(
                        IllegalArgumentException.class,
                        () -> parse("send_bw", "-u", "0").resolve("rxe0"))
                .getMessage()
                .contains("-u must be 1..31"));
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("send_bw", "-u", "32").resolve("rxe0"));
    }

    @Test
    void depthsArePrintedOnTheSidesPerftestPrintsThem() {
        // perftest 4.5's ctx_print_test_info and its JSON: TX depth on the client or with -b, RX depth
        // for SEND on the server or with -b (a unidirectional send_bw client printed RX depth before)
        PerfOptions sendClient = parse("send_bw", "10.0.0.1").resolve("rxe0");
        PerfOptions sendServer = parse("send_bw").resolve("rxe0");
        PerfOptions sendBiClient = parse("send_bw", "-b", "10.0.0.1").resolve("rxe0");
        PerfOptions sendBiServer = parse("send_bw", "-b").resolve("rxe0");
        assertTrue(PerfRunner.printsTxDepth(sendClient));
        assertFalse(PerfRunner.printsTxDepth(sendServer));
        assertTrue(PerfRunner.printsTxDepth(sendBiServer));
        assertFalse(PerfRunner.printsRxDepth(sendClient, 512));
        assertTrue(PerfRunner.printsRxDepth(sendServer, 512));
        assertTrue(PerfRunner.printsRxDepth(sendBiClient, 512));
        assertFalse(PerfRunner.printsRxDepth(parse("send_lat", "10.0.0.1").resolve("rxe0"), 512));
        assertTrue(PerfRunner.printsRxDepth(parse("send_lat").resolve("rxe0"), 512));
        assertFalse(PerfRunner.printsRxDepth(parse("write_bw").resolve("rxe0"), 0), "no receives, no RX depth");
        assertFalse(PerfRunner.printsTxDepth(parse("write_lat").resolve("rxe0")));
    }

    @Test
    void hugePagesAndOnDemandPagingAreHostMemoryOptions() {
        PerfOptions off = parse("write_bw").resolve("rxe0");
        assertFalse(off.useHugepages || off.odp, "both off by default, as in perftest");
        assertTrue(parse("write_bw", "--use_hugepages", "host").resolve("rxe0").useHugepages);
        assertTrue(parse("send_lat", "--odp", "host").resolve("rxe0").odp);
        assertTrue(assertThrows(
                        IllegalArgumentException.class,
                        () -> parse("write_bw", "--use_hugepages", "--odp").resolve("rxe0"))
                .getMessage()
                .contains("give one of --odp, --use_hugepages"));
        assertTrue(assertThrows(
                        IllegalArgumentException.class,
                        () -> parse("write_bw", "--use_cuda=0", "--odp").resolve("rxe0"))
                .getMessage()
                .contains("GPU memory"));
    }

    @Test
    void deviceMemoryNoLockAndThePostApiAreRefusedWhereTheyCannotApply() {
        PerfOptions off = parse("write_bw").resolve("rxe0");
        assertFalse(off.dm || off.noLock, "both off by default, as in perftest");
        PerfOptions dm = parse("write_bw", "--dm", "host").resolve("rxe0");
        assertTrue(dm.dm);
        assertEquals(0, dm.inline, "no inline data from a buffer the CPU cannot read");
        assertTrue(parse("send_lat", "--no_lock", "host").resolve("rxe0").noLock);
        String[][] refused = {
            {"write_lat", "--dm"},
            {"write_bw", "--dm", "--odp"},
            {"send_bw", "--dm", "-I", "64"},
            {"write_bw", "--no_lock", "-R"}
        };
        String[] why = {"latency tests poll a byte", "omit --use_cuda, --use_hugepages and --odp", "omit -I", "omit one"
        };
        for (int i = 0; i < refused.length; i++) {
            String[] args = refused[i];
            IllegalArgumentException e = assertThrows(
                    IllegalArgumentException.class, () -> parse(args).resolve("rxe0"), String.join(" ", args));
            assertTrue(e.getMessage().contains(why[i]), e.getMessage());
        }
    }

    @Test
    void useHugepagesGetsHugePagesOrFailsWithTheReason() throws java.io.IOException {
        long free = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/meminfo")).stream()
                .filter(l -> l.startsWith("HugePages_Free:"))
                .mapToLong(l -> Long.parseLong(l.replaceAll("\\D", "")))
                .findFirst()
                .orElse(0);
        if (free > 0) {
            org.verbs4j.pool.RegionAllocator.Allocation a = HostBufferProvider.HUGE_PAGES_ONLY.allocate(1 << 20, 4096);
            assertTrue(a.description().startsWith("hugetlb"), a.description());
            a.close();
        } else {
            IllegalStateException e = assertThrows(
                    IllegalStateException.class, () -> HostBufferProvider.HUGE_PAGES_ONLY.allocate(1 << 20, 4096));
            assertTrue(e.getMessage().startsWith("--use_hugepages: no huge pages"), e.getMessage());
            assertTrue(e.getMessage().contains("nr_hugepages"), e.getMessage());
        }
    }

    @Test
    void notYetAvailableOptionsSayWhy() {
        assertTrue(assertThrows(
                        IllegalArgumentException.class,
                        () -> parse("write_bw", "-R", "-c", "UC", "host").resolve("rxe0"))
                .getMessage()
                .contains("librdmacm"));
        assertTrue(parse("write_bw", "-R", "host").resolve("rxe0").rdmaCm, "-R is accepted for RC");
        assertTrue(
                assertThrows(
                                IllegalArgumentException.class,
                                () -> parse("write_lat", "--use_cuda", "0").resolve("rxe0"))
                        .getMessage()
                        .contains("CPU"),
                "latency tests poll the buffer with the CPU");
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("atomic_bw", "--use_cuda", "0").resolve("rxe0"));
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("send_bw", "--use_cuda", "0", "-I", "64").resolve("rxe0"));
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("write_bw", "--use_cuda_dmabuf").resolve("rxe0"));
        assertEquals(0, parse("send_bw", "--use_cuda=1", "--use_cuda_dmabuf").resolve("rxe0").inline);
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("read_bw", "-c", "UC").resolve("rxe0"));
        assertThrows(
                IllegalArgumentException.class,
                () -> parse("atomic_bw", "-s", "16").resolve("rxe0"));
        assertThrows(IllegalArgumentException.class, () -> parse("nonsense").resolve("rxe0"));
    }

    @Test
    void udIsForSendTestsOnlyWithPerftestsReason() {
        for (String t : new String[] {"write_bw", "write_lat", "read_bw", "read_lat", "atomic_bw", "atomic_lat"}) {
            IllegalArgumentException e = assertThrows(
                    IllegalArgumentException.class, () -> parse(t, "-c", "UD").resolve("rxe0"), t);
            assertTrue(e.getMessage().contains("UD connection only possible in SEND verb"), e.getMessage());
            // with -R the verb is refused first too (before any rdma_cm connection is tried)
            assertThrows(
                    IllegalArgumentException.class,
                    () -> parse(t, "-R", "-c", "UD", "host").resolveRdmaCm(),
                    t);
        }
        PerfOptions bw = parse("send_bw", "-c", "ud").resolve("rxe0");
        assertEquals("UD", bw.connection);
        assertEquals(5000, bw.rxDepth, "perftest: the default rx depth becomes the iteration count on UD");
        assertEquals(100, bw.cq, "perftest keeps CQ moderation on UD even for a (default) 64 KiB size");
        assertEquals(16000, parse("send_bw", "-c", "UD", "-n", "20000").resolve("rxe0").rxDepth, "at most 16000");
        assertEquals(300, parse("send_bw", "-c", "UD", "-r", "300").resolve("rxe0").rxDepth, "a given depth stays");
        assertEquals(512, parse("send_bw").resolve("rxe0").rxDepth, "RC keeps 512");
        assertEquals(188, parse("send_lat", "-c", "UD").resolve("mlx5_0").inline, "perftest's UD inline default");
        assertEquals(0, parse("send_lat", "-c", "UD").resolve("rxe0").inline);
        assertEquals(
                884,
                parse("send_lat", "-c", "UD", "-I", "1000").resolve("rxe0").inline,
                "cut to perftest's UD maximum");
        assertEquals(1000, parse("send_lat", "-I", "1000").resolve("rxe0").inline, "RC is not cut");
        UnsupportedOperationException cm = assertThrows(
                UnsupportedOperationException.class,
                () -> parse("send_bw", "-R", "-c", "UD", "host").resolveRdmaCm());
        assertTrue(cm.getMessage().contains("drop -R"), cm.getMessage());
        assertThrows(
                UnsupportedOperationException.class,
                () -> parse("send_lat", "-R", "-c", "UD", "host").resolve("rxe0"));
        UnsupportedOperationException q = assertThrows(
                UnsupportedOperationException.class,
                () -> parse("send_bw", "-c", "UD", "-q", "2").resolve("rxe0"));
        assertTrue(q.getMessage().contains("-q 2 with -c UD"), q.getMessage());
        assertEquals(
                512,
                parse("send_bw", "-c", "UD", "-D", "2").resolve("rxe0").rxDepth,
                "duration mode: perftest keeps the default rx depth (no iteration count to post)");
        assertEquals(512, parse("send_bw", "-c", "UC", "-D", "2").resolve("rxe0").rxDepth);
        assertEquals(200, parse("send_bw", "-c", "UD", "-b", "-n", "200").resolve("rxe0").rxDepth, "-b: all posted");
    }

    @Test
    void udMessagesAreAtMostTheMtu() {
        java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
        java.io.PrintStream err = new java.io.PrintStream(buf, true, java.nio.charset.StandardCharsets.UTF_8);
        assertArrayEquals(new int[] {1024}, UdTransport.fitToMtu(new int[] {1024}, false, true, 1024, err));
        assertArrayEquals(new int[] {2}, UdTransport.fitToMtu(new int[] {2}, false, true, 1024, err));
        assertEquals("", buf.toString(java.nio.charset.StandardCharsets.UTF_8));
        // the default size (64 KiB in send_bw) is cut to the MTU, with perftest's note
        assertArrayEquals(new int[] {1024}, UdTransport.fitToMtu(new int[] {65536}, false, false, 1024, err));
        assertTrue(buf.toString(java.nio.charset.StandardCharsets.UTF_8).contains("Max msg size in UD is MTU 1024"));
        // an explicit -s above it is refused, as perftest refuses it
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class, () -> UdTransport.fitToMtu(new int[] {2048}, false, true, 1024, err));
        assertTrue(e.getMessage().contains("cannot be greater than MTU"), e.getMessage());
        // -a: 2 .. MTU
        int[] all = parse("send_bw", "-c", "UD", "-a").resolve("rxe0").sizes;
        assertArrayEquals(
                new int[] {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096},
                UdTransport.fitToMtu(all, true, false, 4096, err));
        assertArrayEquals(new int[] {2, 4, 8, 16, 32, 64, 128, 256}, UdTransport.fitToMtu(all, true, false, 256, err));
    }

    @Test
    void udRoutesByTheGidOrTheLid() {
        byte[] gid = new byte[16];
        gid[10] = (byte) 0xff;
        gid[11] = (byte) 0xff;
        gid[12] = 10;
        gid[15] = 2;
        KeyMessage peer = new KeyMessage(0x12, 0, 0x123, 7, 0, 0, gid, 0);
        org.verbs4j.AddressVector g = UdTransport.route(1, 3, peer);
        assertTrue(g.isGlobal());
        assertArrayEquals(gid, g.dgid().toBytes());
        assertEquals(3, g.sgidIndex());
        assertEquals(255, g.hopLimit(), "perftest's hop limit");
        org.verbs4j.AddressVector l = UdTransport.route(2, -1, peer);
        assertEquals(0x12, l.dlid());
        assertEquals(2, l.port());
        assertTrue(!l.isGlobal());
        assertThrows(
                IllegalStateException.class,
                () -> UdTransport.route(1, 3, new KeyMessage(0x12, 0, 0x123, 7, 0, 0, null, 0)));
    }

    @Test
    void helpIsGeneratedFromTheOptions() {
        StringWriter sw = new StringWriter();
        new CommandLine(new PerfOptions()).usage(new PrintWriter(sw));
        String help = sw.toString();
        for (String opt : new String[] {
            "--ib-dev",
            "--gid-index",
            "--size",
            "--all",
            "--iters",
            "--duration",
            "--tx-depth",
            "--cq-mod",
            "--post_list",
            "--inline_size",
            "--qp",
            "--connection",
            "--mtu",
            "--port",
            "--CPU-freq",
            "--rdma_cm",
            "--report_gbits",
            "--out_json",
            "--out_json_file",
            "--bidirectional",
            "--use_cuda"
        }) {
            assertTrue(help.contains(opt), opt + " in --help");
        }
    }
}
