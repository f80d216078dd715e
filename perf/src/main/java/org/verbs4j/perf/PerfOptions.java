package org.verbs4j.perf;

import java.time.Duration;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * The command line of one verbs-perf test, with perftest's option names and defaults (parsed by
 * picocli; {@code --help} is generated from these annotations). Defaults that depend on the test
 * (size, iterations, tx depth, CQ moderation, inline) are resolved by {@link #resolve}. One
 * thread.
 */
@Command(
        name = "verbs-perf",
        mixinStandardHelpOptions = true,
        sortOptions = false,
        version = "verbs-perf (verbs4j), wire-compatible with perftest " + PerftestTcpConnection.PERFTEST_VERSION,
        description = {
            "RDMA micro-benchmarks on verbs4j, a peer of perftest: a verbs-perf client runs against an ib_* server",
            "of the same test and an ib_* client against a verbs-perf server (perftest's TCP exchange).",
            "No HOST: server; with HOST: client. Output: perftest's columns and units.",
            "-c UD (send_bw, send_lat): perftest's Q_Key 0x11111111, messages up to the MTU (-s above it refused).",
            "Also: verbs-perf devices (every device, port, GID)."
        },
        footer = {
            "",
            "Tests: write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw atomic_lat",
            "Exit status: 0 ok, 1 failure, 2 usage error. JVM: java --enable-native-access=ALL-UNNAMED",
            "-jar verbs-perf.jar ... (-Dverbs4j.unchecked=true skips Java-side checks)"
        })
public final class PerfOptions {
    @Parameters(
            index = "0",
            paramLabel = "TEST",
            description =
                    "write_bw | write_lat | read_bw | read_lat | send_bw" + " | send_lat | atomic_bw | atomic_lat")
    String testName;

    @Parameters(
            index = "1",
            arity = "0..1",
            paramLabel = "HOST",
            description = "the server to connect to (no HOST: be the server)")
    String host;

    @Option(
            names = {"-d", "--ib-dev"},
            paramLabel = "DEV",
            description = "IB device (default: the first one)")
    String device;

    @Option(
            names = {"-i", "--ib-port"},
            paramLabel = "PORT",
            defaultValue = "1",
            description = "port of the IB device (default ${DEFAULT-VALUE})")
    int ibPort;

    @Option(
            names = {"-x", "--gid-index"},
            paramLabel = "N",
            defaultValue = "-1",
            description = "GID index (default: on RoCE the RoCE v2 GID of the local IPv4 address; LID on InfiniBand)")
    int gidIndex;

    @Option(
            names = {"-s", "--size"},
            paramLabel = "B",
            description = "message size (default 65536 bw, 2 lat, 8 atomic)")
    Integer size;

    @Option(
            names = {"-a", "--all"},
            description = "all sizes 2 .. 2^23 (atomic: 8 only)")
    boolean all;

    @Option(
            names = {"-n", "--iters"},
            paramLabel = "N",
            description = "iterations (default 5000 bw, 1000 lat)")
    Long iters;

    @Option(
            names = {"-D", "--duration"},
            paramLabel = "SEC",
            description = "duration mode: run for SEC seconds, report the sample period "
                    + "(SEC - 2 margins); bandwidth tests; not with -n or -a")
    Integer duration;

    @Option(
            names = {"-f", "--margin"},
            paramLabel = "SEC",
            description = "with -D: seconds before and after the sample " + "period (default SEC / 4)")
    Integer margin;

    @Option(
            names = {"-t", "--tx-depth"},
            paramLabel = "N",
            description = "send queue depth (default 128 bw, 1 lat)")
    Integer txDepth;

    @Option(
            names = {"-r", "--rx-depth"},
            paramLabel = "N",
            defaultValue = "512",
            description = "receive queue depth of send tests (default ${DEFAULT-VALUE})")
    int rxDepth;

    @Option(
            names = {"-Q", "--cq-mod"},
            paramLabel = "N",
            description = "signal every N-th send (default 100; 1 above 8 KiB)")
    Integer cqMod;

    @Option(
            names = {"-l", "--post_list"},
            paramLabel = "N",
            defaultValue = "1",
            description = "work requests per post (default ${DEFAULT-VALUE})")
    int postList;

    @Option(
            names = {"-I", "--inline_size"},
            paramLabel = "B",
            description = "max inline bytes (default as perftest: 0 on rxe "
                    + "and unknown devices, 220 write_lat / 236 send_lat (UD: 188, at most 884) on mlx)")
    Integer inlineSize;

    @Option(
            names = {"-q", "--qp"},
            paramLabel = "N",
            defaultValue = "1",
            description = "queue pairs per side (bandwidth tests; " + "-n per QP; default ${DEFAULT-VALUE})")
    int qps;

    @Option(
            names = {"-c", "--connection"},
            paramLabel = "RC|UC|UD",
            defaultValue = "RC",
            description = "transport (default ${DEFAULT-VALUE}; UC for write/send; UD for send_bw/send_lat, "
                    + "messages up to the MTU, not with -R)")
    String connection;

    @Option(
            names = {"-m", "--mtu"},
            paramLabel = "B",
            description = "path MTU (256..4096; default the port's active MTU)")
    Integer mtu;

    @Option(
            names = {"-u", "--qp-timeout"},
            paramLabel = "N",
            defaultValue = "14",
            description = "QP ACK timeout: "
                    + "4.096 us x 2^N before a request is sent again (1..31; default ${DEFAULT-VALUE}, as perftest; 0, "
                    + "which would wait forever, is refused)")
    int qpTimeout;

    @Option(
            names = {"-p", "--port"},
            paramLabel = "PORT",
            defaultValue = "18515",
            description = "TCP port of the exchange (default ${DEFAULT-VALUE})")
    int tcpPort;

    @Option(
            names = {"-o", "--outs"},
            paramLabel = "N",
            description = "outstanding reads/atomics (default the device maximum, as perftest)")
    Integer outReads;

    @Option(
            names = {"-A", "--atomic_type"},
            paramLabel = "TYPE",
            defaultValue = "FETCH_AND_ADD",
            description = "CMP_AND_SWAP or FETCH_AND_ADD (default ${DEFAULT-VALUE})")
    String atomicType;

    @Option(
            names = {"-b", "--bidirectional"},
            description =
                    "bidirectional: both sides send and " + "each prints the sum of both directions (bandwidth tests)")
    boolean bidirectional;

    @Option(
            names = {"-F", "--CPU-freq"},
            description = "accepted for perftest compatibility (verbs-perf times with System.nanoTime)")
    boolean cpuFreq;

    @Option(
            names = {"-R", "--rdma_cm"},
            description =
                    "connect the QP with rdma_cm and exchange perftest's messages over rdma_cm (as perftest -R; RC)")
    boolean rdmaCm;

    @Option(names = "--report_gbits", description = "report bandwidth in Gb/s instead of MB/s")
    boolean reportGbits;

    @Option(names = "--out_json", description = "write the report as JSON (to --out_json_file)")
    boolean outJson;

    @Option(
            names = "--out_json_file",
            paramLabel = "FILE",
            defaultValue = "perftest_out.json",
            description = "JSON report file (default ${DEFAULT-VALUE})")
    String outJsonFile;

    @Option(
            names = "--perform_warm_up",
            description = "an untimed round of tx-depth operations before timing (perftest's warm-up)")
    boolean warmUp;

    @Option(
            names = "--jit_settle",
            paramLabel = "SEC",
            description = "verbs-perf only: wait (no traffic) until this JVM's "
                    + "JIT compiler is idle, at most SEC seconds, before timing: a client after the handshake, before its loop; a server "
                    + "whose loop is timed (write_lat, send_lat, the send_bw receiver) before the last barrier, where its peer waits "
                    + "untimed; 0 (default): do not wait. perftest-compare.sh gives it to verbs-perf clients and servers (a C peer has "
                    + "no compiler running)")
    int jitSettle;

    @Option(
            names = "--use_cuda",
            paramLabel = "GPU",
            description =
                    "the buffers in the memory of CUDA GPU N, registered through nvidia-peermem (bandwidth tests; needs a CUDA driver)")
    Integer useCuda;

    @Option(
            names = "--use_cuda_dmabuf",
            description = "with --use_cuda: register the GPU memory as a dma-buf (ibv_reg_dmabuf_mr)")
    boolean useCudaDmabuf;

    @Option(
            names = "--use_hugepages",
            description = "the buffers in huge pages (mmap MAP_HUGETLB); fails when none are free "
                    + "(reserve them with /proc/sys/vm/nr_hugepages)")
    boolean useHugepages;

    @Option(
            names = "--odp",
            description = "register the buffers with on-demand paging (IBV_ACCESS_ON_DEMAND) instead of pinning them; "
                    + "refused, naming the missing capability, on a device without ODP")
    boolean odp;

    @Option(
            names = "--dm",
            description = "the buffers in the adapter's own memory (ibv_alloc_dm, bandwidth tests); "
                    + "refused, naming the device attribute, on a device without device memory")
    boolean dm;

    @Option(
            names = "--use_old_post_send",
            description = "post with ibv_post_send (perftest's option; verbs-perf's default: see --use_new_post_send)")
    boolean oldPostSend;

    @Option(
            names = "--use_new_post_send",
            description = "post through the extended API (ibv_create_qp_ex, ibv_wr_start/ibv_wr_*/ibv_wr_complete), "
                    + "perftest's default; not verbs-perf's, where each ibv_wr_* is a downcall of its own")
    boolean newPostSend;

    @Option(
            names = "--no_lock",
            description = "create the QPs on a parent domain of a thread domain (ibv_alloc_td), so that "
                    + "the provider may drop their locks; refused, naming what is missing, on a device without")
    boolean noLock;

    @Option(
            names = "--timeout",
            paramLabel = "SEC",
            defaultValue = "120",
            description = "verbs-perf only: bound on connecting, "
                    + "on each exchange and on every wait for a completion (default ${DEFAULT-VALUE})")
    long timeoutSeconds;

    // ---- resolved -------------------------------------------------------------------------

    PerfTest test;
    long iterations;
    int tx;
    int cq;
    int inline;
    int[] sizes;

    /** The checks of {@code --dm} and {@code --no_lock} that need no device. */
    private void checkDeviceMemory() {
        if (newPostSend && (oldPostSend || rdmaCm)) {
            throw new IllegalArgumentException(
                    oldPostSend
                            ? "give one of --use_new_post_send, --use_old_post_send"
                            : "--use_new_post_send: with -R rdma_cm creates the QPs, without the extended API; omit one");
        }
        if (noLock && rdmaCm) {
            throw new IllegalArgumentException(
                    "--no_lock: with -R rdma_cm creates the QPs on the connection's own protection domain; omit one");
        }
        if (!dm) {
            return;
        }
        if (useCuda != null || useHugepages || odp) {
            throw new IllegalArgumentException(
                    "--dm: the buffer is the adapter's memory; " + "omit --use_cuda, --use_hugepages and --odp");
        }
        if (!test.bandwidth()) {
            throw new IllegalArgumentException("--dm: the latency tests poll a byte of the buffer with the CPU, "
                    + "which cannot read device memory; use a bandwidth test (write_bw, read_bw, send_bw, atomic_bw)");
        }
        if (inlineSize != null && inlineSize > 0) {
            throw new IllegalArgumentException(
                    "--dm: inline data is copied by the CPU from the buffer, which is in device memory; omit -I");
        }
    }

    /** The checks of {@code --use_cuda} that need no device. */
    void resolveGpu() {
        test = PerfTest.of(testName);
        if (useCudaDmabuf && useCuda == null) {
            throw new IllegalArgumentException("--use_cuda_dmabuf goes with --use_cuda=N (which GPU)");
        }
        if ((useHugepages || odp) && useCuda != null) {
            throw new IllegalArgumentException((useHugepages ? "--use_hugepages" : "--odp")
                    + ": the buffer is GPU memory (--use_cuda); host memory options do not apply");
        }
        if (useHugepages && odp) {
            throw new IllegalArgumentException(
                    "--odp registers memory the region keeps alive, not a huge-page mapping; give one of --odp, --use_hugepages");
        }
        checkDeviceMemory();
        if (useCuda == null) {
            return;
        }
        if (useCuda < 0) {
            throw new IllegalArgumentException("--use_cuda takes a GPU ordinal (0, 1, ...): " + useCuda);
        }
        if (!test.bandwidth()) {
            throw new IllegalArgumentException("--use_cuda: the latency tests poll a byte of the buffer with the CPU, "
                    + "which cannot read GPU memory; use a bandwidth test (write_bw, read_bw, send_bw)");
        }
        if (test.verb() == PerfTest.Verb.ATOMIC) {
            throw new IllegalArgumentException("--use_cuda: the GPU buffer is registered without remote atomic access; "
                    + "use write_bw, read_bw or send_bw");
        }
        if (inlineSize != null && inlineSize > 0) {
            throw new IllegalArgumentException(
                    "--use_cuda: inline data is copied by the CPU from the buffer, which is in "
                            + "GPU memory; omit -I");
        }
    }

    /** The checks of {@code -R} that come before connecting (perftest's): RC only, one QP. */
    void resolveRdmaCm() {
        test = PerfTest.of(testName);
        if (connection.toUpperCase(Locale.ROOT).equals("UC")) {
            throw new IllegalArgumentException("-R: UC is not supported in librdmacm (perftest refuses it too)");
        }
        if (connection.toUpperCase(Locale.ROOT).equals("UD")) {
            UdTransport.check(test, true);
        }
        if (!server() && host == null) {
            throw new IllegalArgumentException("-R: the client needs the server's IP address (of its RDMA interface)");
        }
    }

    /** Checks the options and fills the test-dependent defaults; throws {@link IllegalArgumentException}. */
    public PerfOptions resolve(String deviceName) {
        test = PerfTest.of(testName);
        if (rdmaCm) {
            resolveRdmaCm();
        }
        resolveGpu();
        PerfModes.check(this); // -q, -b, -D, -f
        resolveConnection();
        checkProtocolOptions();
        resolveSizes();
        resolveDepths();
        resolveCqModeration();
        resolveInline(deviceName);
        return this;
    }

    /** {@code -c}: RC, UC (no reads or atomics) or UD (its tests, one QP). */
    private void resolveConnection() {
        connection = connection.toUpperCase(Locale.ROOT);
        switch (connection) {
            case "RC" -> {}
            case "UC" -> {
                if (test.verb() == PerfTest.Verb.READ || test.verb() == PerfTest.Verb.ATOMIC) {
                    throw new IllegalArgumentException("UC has no RDMA READ or atomics (perftest refuses it too)");
                }
            }
            case "UD" -> {
                UdTransport.check(test, rdmaCm);
                if (qps > 1) {
                    throw new UnsupportedOperationException("-q " + qps + " with -c UD is not available in this build "
                            + "(one UD QP per side); use -q 1");
                }
            }
            default -> throw new IllegalArgumentException("-c must be RC, UC or UD: " + connection);
        }
    }

    /** {@code -A}, {@code -u}, {@code -m}. */
    private void checkProtocolOptions() {
        atomicType = atomicType.toUpperCase(Locale.ROOT);
        if (!atomicType.equals("FETCH_AND_ADD") && !atomicType.equals("CMP_AND_SWAP")) {
            throw new IllegalArgumentException("-A must be CMP_AND_SWAP or FETCH_AND_ADD: " + atomicType);
        }
        if (qpTimeout < 1 || qpTimeout > 31) {
            throw new IllegalArgumentException("-u must be 1..31 (4.096 us x 2^N; 0 would wait forever): " + qpTimeout);
        }
        if (mtu != null && (mtu < 256 || mtu > 4096 || Integer.bitCount(mtu) != 1)) {
            throw new IllegalArgumentException("-m must be 256, 512, 1024, 2048 or 4096: " + mtu);
        }
    }

    /** {@code -s} or {@code -a} (2 B .. 8 MiB; 8 B for the atomics), perftest's default size per test. */
    private void resolveSizes() {
        boolean atomic = test.verb() == PerfTest.Verb.ATOMIC;
        if (atomic && size != null && size != 8) {
            throw new IllegalArgumentException("atomic tests use 8-byte messages (-s 8)");
        }
        if (all) {
            sizes = new int[atomic ? 1 : 23];
            for (int i = 0; i < sizes.length; i++) {
                sizes[i] = atomic ? 8 : 1 << (i + 1);
            }
        } else {
            int s = size != null ? size : atomic ? 8 : test.bandwidth() ? 65536 : 2;
            if (s < 1 || s > (1 << 30)) {
                throw new IllegalArgumentException("-s must be 1 .. 2^30: " + s);
            }
            sizes = new int[] {s};
        }
    }

    /** {@code -n}, {@code -t}, {@code -l}, {@code -r}: perftest's defaults per test and their bounds. */
    private void resolveDepths() {
        iterations = duration != null ? 0 : iters != null ? iters : test.bandwidth() ? 5000 : 1000;
        if (duration == null && (iterations < 5 || iterations * qps > PerfModes.MAX_TIMESTAMPS)) {
            throw new IllegalArgumentException("-n must be 5 .. 10^8 (times -q " + qps + "): " + iterations);
        }
        tx = txDepth != null ? txDepth : test.bandwidth() ? 128 : 1;
        if (duration == null) {
            tx = (int) Math.min(tx, iterations);
        }
        if (tx < 1 || tx > 16384) {
            throw new IllegalArgumentException("-t must be 1 .. 16384: " + tx);
        }
        if (postList < 1 || postList > tx) {
            throw new IllegalArgumentException("-l must be 1 .. tx depth (" + tx + "): " + postList);
        }
        if (rxDepth < 1 || rxDepth > 16384) {
            throw new IllegalArgumentException("-r must be 1 .. 16384: " + rxDepth);
        }
        if ((connection.equals("UD") || connection.equals("UC")) && duration == null) {
            // perftest: no flow control, post them all (iterations mode only: with -D the depth stays)
            rxDepth = UdTransport.rxDepth(rxDepth, iterations);
        }
    }

    /**
     * perftest: CQ moderation 100, off (1) above 8 KiB unless asked for (not with -a, not on UD),
     * never above the tx depth; a post list signals its last request.
     */
    private void resolveCqModeration() {
        cq = cqMod != null ? cqMod : 100;
        if (cqMod == null && !all && !connection.equals("UD") && sizes[0] > 8192) {
            cq = 1;
        }
        if (postList > 1 && cqMod == null) {
            cq = postList;
        }
        cq = Math.max(1, Math.min(cq, tx));
    }

    /** {@code -I}: perftest's default inline size on mlx devices (none elsewhere), none for reads, atomics and GPU memory. */
    private void resolveInline(String deviceName) {
        boolean ud = connection.equals("UD");
        if (inlineSize != null) {
            inline = inlineSize;
        } else {
            boolean known = deviceName != null && deviceName.startsWith("mlx");
            inline = !known || test.bandwidth()
                    ? 0
                    : switch (test.verb()) {
                        case WRITE -> 220;
                        case SEND -> ud ? UdTransport.DEFAULT_INLINE_LAT : 236;
                        default -> 0;
                    };
        }
        if (test.verb() == PerfTest.Verb.READ || test.verb() == PerfTest.Verb.ATOMIC || useCuda != null || dm) {
            inline = 0;
        }
        if (ud) {
            inline = UdTransport.inline(inline, System.err);
        }
        if (inline < 0 || inline > 1024) {
            throw new IllegalArgumentException("-I must be 0 .. 1024: " + inline);
        }
    }

    boolean server() {
        return host == null;
    }

    Duration timeout() {
        return Duration.ofSeconds(timeoutSeconds);
    }

    int maxSize() {
        int m = 0;
        for (int s : sizes) {
            m = Math.max(m, s);
        }
        return m;
    }
}
