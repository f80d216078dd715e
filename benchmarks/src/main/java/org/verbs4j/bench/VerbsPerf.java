package org.verbs4j.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import org.verbs4j.ConnectOptions;
import org.verbs4j.ConnectionData;
import org.verbs4j.Context;
import org.verbs4j.DeviceAttributes;
import org.verbs4j.DeviceInfo;
import org.verbs4j.GidEntry;
import org.verbs4j.GidType;
import org.verbs4j.OutOfBandChannel;
import org.verbs4j.PortAttributes;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.Verbs;
import org.verbs4j.natives.InlineVerbs;
import org.verbs4j.VerbsException;

/**
 * {@code verbs-perf}: a perftest-like command-line tool on verbs4j's public API. See
 * {@link #USAGE}. Connection data goes over {@link OutOfBandChannel} (TCP); every wait is
 * bounded by {@code --timeout}; the timed loops allocate nothing (one buffer per side,
 * registered once before any timing; preallocated {@link SendWorkRequests},
 * {@code ReceiveWorkRequests} and {@code WorkCompletions}).
 */
public final class VerbsPerf {
    static final String USAGE = """
            verbs-perf: RDMA micro-benchmarks on verbs4j (perftest-like)

            Usage:
              verbs-perf devices
                  every device: attributes, each port (state, MTU, link layer, speed, width)
                  and its GID table with types
              verbs-perf TEST [options] --server            (or no host: server, as perftest)
              verbs-perf TEST [options] --client HOST       (or HOST as the last argument)
              verbs-perf TEST [options] --loopback          both sides in this process, one device
              verbs-perf loopback [TEST[:SIZES] ...] [options]
                  several tests in loopback in one JVM, e.g.
                  verbs-perf loopback write_bw:4096,65536 write_lat:8
                  (default: write_bw:4096,65536 read_bw:65536 write_lat:8 send_lat:8)

            TEST: write_bw | read_bw      bandwidth of RDMA WRITE / RDMA READ (client -> server)
                  write_lat | send_lat    ping-pong latency of RDMA WRITE / SEND (half round trip)

            Options:
              -d, --ib-dev DEV       device (default: the first one)
              -i, --ib-port N        port (default 1)
              -x, --gid-index N      GID index (default: the RoCE v2 GID of the local IPv4 address
                                     (towards HOST on a client), else the first RoCE v2 IPv4 GID;
                                     LID routing on InfiniBand)
              -s, --size B[,B...]    message sizes in bytes (default 65536 for bw, 2 for lat)
              -n, --iters N          timed iterations per size (default 5000 for bw, 1000 for lat)
              -t, --tx-depth N       bw: work requests in flight (default 128)
              -Q, --cq-mod N         bw: signal every N-th work request (default min(100, tx depth))
              -l, --post-list N      bw: work requests per ibv_post_send (default 1)
              -w, --warmup N         untimed iterations per warm-up round (default 200)
                  --warmup-time SEC  warm-up rounds (untimed, per size) until SEC seconds passed, so that
                                     the JIT has compiled the loops (default 3; 0: one round)
              -p, --port PORT        TCP port of the connection-data exchange (default 18515)
                  --timeout SEC      bound on connecting, on each exchange and on every wait for a
                                     completion or a peer's write (default 120)
              -h, --help             this text

            Both sides of a client/server run must be given the same TEST, sizes, iterations
            and warm-up (checked at connect). Transport: RC, ConnectOptions.roce(GID index)
            defaults (retry_cnt 6, rnr_retry 6, ACK timeout 14: never the infinite 7).
            Output (client or loopback), one row per size:
              bw : #bytes #iterations BW average[MB/sec] BW average[Gb/sec] MsgRate[Mpps]
                   (MB = 2^20 bytes as perftest's MB/sec; Gb = 10^9 bits)
              lat: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9% (usec,
                   half round trip as perftest; t_typical = median)
            JVM flags: java --enable-native-access=ALL-UNNAMED -cp verbs4j-benchmarks.jar
            org.verbs4j.bench.VerbsPerf ... (-Dverbs4j.unchecked=true skips Java-side checks).
            Exit status: 0 ok, 1 failure, 2 usage error.
            """;

    static final int DEFAULT_TCP_PORT = 18515;
    static final List<String> TESTS = List.of("write_bw", "read_bw", "write_lat", "send_lat");
    private static final PrintStream OUT = System.out;

    enum Role { SERVER, CLIENT, LOOPBACK }

    /** Parsed command line. */
    static final class Options {
        String test;
        String device;
        int ibPort = 1;
        int gidIndex = -2; // -2: automatic
        int[] sizes;
        int iterations;
        int txDepth = 128;
        int cqMod;
        int postList = 1;
        int warmup = 200;
        double warmupSeconds = 3;
        int tcpPort = DEFAULT_TCP_PORT;
        long timeoutSeconds = 120;
        Role role;
        String host;
        final List<String> plan = new ArrayList<>();

        boolean bandwidth() {
            return test.endsWith("_bw");
        }

        int[] sizesOrDefault() {
            return sizes != null ? sizes : new int[] {bandwidth() ? 65536 : 2};
        }

        int iterationsOrDefault() {
            return iterations > 0 ? iterations : bandwidth() ? 5000 : 1000;
        }

        int cqModOrDefault() {
            return Math.max(1, Math.min(cqMod > 0 ? cqMod : 100, txDepth));
        }

        Duration timeout() {
            return Duration.ofSeconds(timeoutSeconds);
        }

        /** What both sides must agree on. */
        long fingerprint() {
            return ((long) test.hashCode() * 31 + Arrays.hashCode(sizesOrDefault())) * 31 * 31
                    + (long) iterationsOrDefault() * 31 + (bandwidth() ? 0 : warmup);
        }

        long warmupNanos() {
            return (long) (warmupSeconds * 1e9);
        }

        Options copyFor(String test, int[] sizes) {
            Options o = new Options();
            o.test = test;
            o.device = device;
            o.ibPort = ibPort;
            o.gidIndex = gidIndex;
            o.sizes = sizes;
            o.iterations = iterations;
            o.txDepth = txDepth;
            o.cqMod = cqMod;
            o.postList = postList;
            o.warmup = warmup;
            o.warmupSeconds = warmupSeconds;
            o.tcpPort = tcpPort;
            o.timeoutSeconds = timeoutSeconds;
            o.role = Role.LOOPBACK;
            return o;
        }
    }

    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private VerbsPerf() {
    }

    public static void main(String[] args) {
        int rc;
        try {
            rc = run(args);
        } catch (UsageException e) {
            System.err.println("verbs-perf: " + e.getMessage());
            System.err.println("(verbs-perf --help for usage)");
            rc = 2;
        } catch (RuntimeException e) {
            System.err.println("verbs-perf: FAILED: " + e.getMessage());
            if (Boolean.getBoolean("verbs4j.perf.stackTraces")) {
                e.printStackTrace();
            }
            rc = 1;
        }
        System.out.flush();
        System.exit(rc);
    }

    static int run(String[] args) {
        if (args.length == 0 || List.of("-h", "--help", "help").contains(args[0])) {
            OUT.print(USAGE);
            return args.length == 0 ? 2 : 0;
        }
        String cmd = args[0];
        if (cmd.equals("devices")) {
            return devices();
        }
        Options o = parse(args);
        if (cmd.equals("loopback")) {
            List<String> plan = o.plan.isEmpty()
                    ? List.of("write_bw:4096,65536", "read_bw:65536", "write_lat:8", "send_lat:8") : o.plan;
            for (String item : plan) {
                String[] parts = item.split(":", 2);
                if (!TESTS.contains(parts[0])) {
                    throw new UsageException("unknown test '" + parts[0] + "' in the loopback plan (tests: " + TESTS + ")");
                }
                int[] sizes = parts.length == 2 ? parseSizes(parts[1]) : o.sizes;
                runTest(o.copyFor(parts[0], sizes));
            }
            return 0;
        }
        if (!TESTS.contains(cmd)) {
            throw new UsageException("unknown command '" + cmd + "' (devices, loopback, " + String.join(", ", TESTS) + ")");
        }
        if (!o.plan.isEmpty()) {
            if (o.host != null || o.plan.size() > 1) {
                throw new UsageException("unexpected arguments " + o.plan);
            }
            o.host = o.plan.getFirst();
        }
        o.test = cmd;
        if (o.role == null) {
            o.role = o.host != null ? Role.CLIENT : Role.SERVER;
        }
        if (o.role == Role.CLIENT && o.host == null) {
            throw new UsageException("--client needs a HOST");
        }
        runTest(o);
        return 0;
    }

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            String v = null;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                v = a.substring(eq + 1);
                a = a.substring(0, eq);
            }
            switch (a) {
                case "--server" -> o.role = Role.SERVER;
                case "--loopback" -> o.role = Role.LOOPBACK;
                case "-c", "--client" -> {
                    o.role = Role.CLIENT;
                    o.host = v != null ? v : value(args, ++i, a);
                }
                case "-d", "--ib-dev" -> o.device = v != null ? v : value(args, ++i, a);
                case "-i", "--ib-port" -> o.ibPort = intValue(v != null ? v : value(args, ++i, a), a, 1, 255);
                case "-x", "--gid-index" -> o.gidIndex = intValue(v != null ? v : value(args, ++i, a), a, 0, 65535);
                case "-s", "--size" -> o.sizes = parseSizes(v != null ? v : value(args, ++i, a));
                case "-n", "--iters" -> o.iterations = intValue(v != null ? v : value(args, ++i, a), a, 1, Integer.MAX_VALUE);
                case "-t", "--tx-depth" -> o.txDepth = intValue(v != null ? v : value(args, ++i, a), a, 1, 16384);
                case "-Q", "--cq-mod" -> o.cqMod = intValue(v != null ? v : value(args, ++i, a), a, 1, 16384);
                case "-l", "--post-list" -> o.postList = intValue(v != null ? v : value(args, ++i, a), a, 1, 1024);
                case "-w", "--warmup" -> o.warmup = intValue(v != null ? v : value(args, ++i, a), a, 0, Integer.MAX_VALUE);
                case "--warmup-time" -> o.warmupSeconds = doubleValue(v != null ? v : value(args, ++i, a), a);
                case "-p", "--port" -> o.tcpPort = intValue(v != null ? v : value(args, ++i, a), a, 1, 65535);
                case "--timeout" -> o.timeoutSeconds = intValue(v != null ? v : value(args, ++i, a), a, 1, 86400);
                default -> {
                    if (a.startsWith("-")) {
                        throw new UsageException("unknown option " + a);
                    }
                    o.plan.add(a);
                }
            }
        }
        return o;
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new UsageException(option + " needs a value");
        }
        return args[i];
    }

    private static int intValue(String s, String option, int min, int max) {
        try {
            long v = Long.parseLong(s.trim());
            if (v < min || v > max) {
                throw new UsageException(option + " must be in " + min + ".." + max + ": " + s);
            }
            return (int) v;
        } catch (NumberFormatException e) {
            throw new UsageException(option + " needs a number: " + s);
        }
    }

    private static double doubleValue(String s, String option) {
        try {
            double v = Double.parseDouble(s.trim());
            if (!(v >= 0 && v <= 3600)) {
                throw new UsageException(option + " must be in 0..3600: " + s);
            }
            return v;
        } catch (NumberFormatException e) {
            throw new UsageException(option + " needs a number: " + s);
        }
    }

    static int[] parseSizes(String s) {
        String[] parts = s.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            String p = parts[i].trim().toUpperCase(Locale.ROOT);
            int mult = 1;
            if (p.endsWith("K")) {
                mult = 1024;
                p = p.substring(0, p.length() - 1);
            } else if (p.endsWith("M")) {
                mult = 1024 * 1024;
                p = p.substring(0, p.length() - 1);
            }
            long v = (long) intValue(p, "-s", 1, Integer.MAX_VALUE) * mult;
            if (v > (1L << 30)) {
                throw new UsageException("message size " + parts[i] + " is larger than 1 GiB");
            }
            out[i] = (int) v;
        }
        return out;
    }

    // ---- devices ---------------------------------------------------------------------------

    static int devices() {
        List<DeviceInfo> list = Verbs.devices();
        if (list.isEmpty()) {
            OUT.println("No RDMA device: " + Verbs.unavailabilityCause().orElse("none listed"));
            return 1;
        }
        for (DeviceInfo d : list) {
            OUT.printf("device %s: node type %s, transport %d, node GUID %016x%n", d.name(), d.nodeTypeText(),
                    d.transportType(), d.guid());
            try (Context ctx = Verbs.open(d.name())) {
                DeviceAttributes a = ctx.queryDevice();
                OUT.printf("  fw_ver %s, vendor 0x%x part %d hw_ver 0x%x, sys image GUID %016x, phys ports %d%n",
                        a.firmwareVersion(), a.vendorId(), a.vendorPartId(), a.hardwareVersion(), a.sysImageGuid(),
                        a.physPortCount());
                OUT.printf("  max_qp %d, max_qp_wr %d, max_sge %d, max_sge_rd %d, max_cq %d, max_cqe %d%n",
                        a.maxQp(), a.maxQpWr(), a.maxSge(), a.maxSgeRd(), a.maxCq(), a.maxCqe());
                OUT.printf("  max_mr %d, max_mr_size 0x%x, page_size_cap 0x%x, max_pd %d, max_mw %d, max_ah %d%n",
                        a.maxMr(), a.maxMrSize(), a.pageSizeCap(), a.maxPd(), a.maxMw(), a.maxAh());
                OUT.printf("  max_qp_rd_atom %d, max_qp_init_rd_atom %d, atomic_cap %s, max_srq %d, max_srq_wr %d, "
                                + "max_srq_sge %d, max_pkeys %d, device_cap_flags 0x%x%n",
                        a.maxQpRdAtom(), a.maxQpInitRdAtom(), atomicCap(a.atomicCap()), a.maxSrq(), a.maxSrqWr(),
                        a.maxSrqSge(), a.maxPkeys(), a.deviceCapFlags());
                OUT.printf("  completion vectors %d%n", ctx.numCompVectors());
                for (int port = 1; port <= a.physPortCount(); port++) {
                    PortAttributes p = ctx.queryPort(port);
                    OUT.printf("  port %d: %s (%d), phys state %s, link layer %s, max MTU %d, active MTU %d, "
                                    + "speed %s x width %s = %s, lid %d, sm_lid %d, max_msg_sz 0x%x, cap flags 0x%x%n",
                            port, p.stateText(), p.state(), physState(p.physState()), p.linkLayer(), p.maxMtu().bytes(),
                            p.activeMtu().bytes(), speedText(p.activeSpeed()), widthText(p.activeWidth()),
                            linkRate(p.activeSpeed(), p.activeWidth()), p.lid(), p.smLid(), p.maxMsgSize(),
                            p.portCapFlags());
                    List<GidEntry> gids = ctx.gidTable(port);
                    OUT.printf("    GID table: %d of %d entries populated%n", gids.size(), p.gidTableLength());
                    for (GidEntry g : gids) {
                        OUT.printf("    GID[%3d] %s  %-10s %s%s%n", g.index(), g.gid(), gidType(g.type()),
                                ipv4Of(g).map(ip -> "(" + ip + ") ").orElse(""),
                                g.netdevIndex() > 0 ? "netdev " + netdevName(g.netdevIndex()) : "");
                    }
                }
            } catch (VerbsException e) {
                OUT.println("  cannot query: " + e.getMessage());
            }
        }
        return 0;
    }

    private static String atomicCap(int cap) {
        return switch (cap) {
            case 0 -> "NONE";
            case 1 -> "HCA";
            case 2 -> "GLOB";
            default -> String.valueOf(cap);
        };
    }

    private static String physState(int s) {
        return switch (s) {
            case 1 -> "SLEEP";
            case 2 -> "POLLING";
            case 3 -> "DISABLED";
            case 4 -> "PORT_CONFIGURATION_TRAINING";
            case 5 -> "LINK_UP";
            case 6 -> "LINK_ERROR_RECOVERY";
            case 7 -> "PHY_TEST";
            default -> String.valueOf(s);
        };
    }

    /** {@code IBV_SPEED_*}: the per-lane rate in Gb/s. */
    static double laneGbps(int speed) {
        return switch (speed) {
            case 1 -> 2.5;
            case 2 -> 5.0;
            case 4 -> 10.0;
            case 8 -> 10.3125;
            case 16 -> 14.0625;
            case 32 -> 25.78125;
            case 64 -> 53.125;
            case 128 -> 106.25;
            case 256 -> 212.5;
            default -> 0;
        };
    }

    static String speedText(int speed) {
        String name = switch (speed) {
            case 1 -> "SDR";
            case 2 -> "DDR";
            case 4 -> "QDR";
            case 8 -> "FDR10";
            case 16 -> "FDR";
            case 32 -> "EDR";
            case 64 -> "HDR";
            case 128 -> "NDR";
            case 256 -> "XDR";
            default -> "speed " + speed;
        };
        double g = laneGbps(speed);
        return g > 0 ? name + " (" + fmt(g) + " Gb/s per lane)" : name;
    }

    static int lanes(int width) {
        return switch (width) {
            case 1 -> 1;
            case 2 -> 4;
            case 4 -> 8;
            case 8 -> 12;
            case 16 -> 2;
            default -> 0;
        };
    }

    static String widthText(int width) {
        int l = lanes(width);
        return l > 0 ? l + "X" : "width " + width;
    }

    static String linkRate(int speed, int width) {
        double r = laneGbps(speed) * lanes(width);
        return r > 0 ? fmt(r) + " Gb/s" : "unknown rate";
    }

    private static String fmt(double v) {
        return v == Math.rint(v) ? String.valueOf((long) v) : String.valueOf(v);
    }

    private static String gidType(GidType t) {
        return switch (t) {
            case INFINIBAND -> "IB";
            case ROCE_V1 -> "RoCE v1";
            case ROCE_V2 -> "RoCE v2";
        };
    }

    private static Optional<String> ipv4Of(GidEntry g) {
        byte[] b = g.gid().toBytes();
        for (int i = 0; i < 10; i++) {
            if (b[i] != 0) {
                return Optional.empty();
            }
        }
        if (b[10] != (byte) 0xff || b[11] != (byte) 0xff) {
            return Optional.empty();
        }
        return Optional.of((b[12] & 0xff) + "." + (b[13] & 0xff) + "." + (b[14] & 0xff) + "." + (b[15] & 0xff));
    }

    private static String netdevName(int ifindex) {
        try {
            NetworkInterface ni = NetworkInterface.getByIndex(ifindex);
            return ni != null ? ni.getName() : "#" + ifindex;
        } catch (SocketException e) {
            return "#" + ifindex;
        }
    }

    // ---- GID selection ---------------------------------------------------------------------

    /** The GID index to use (-1: LID routing on InfiniBand), and why, for the header line. */
    record GidChoice(int index, String description) {
    }

    static GidChoice chooseGid(Context ctx, int port, Options o, InetAddress peer) {
        PortAttributes pa = ctx.queryPort(port);
        if (o.gidIndex >= 0) {
            return new GidChoice(o.gidIndex, "GID index " + o.gidIndex + " (-x) " + ctx.queryGid(port, o.gidIndex));
        }
        if (!pa.isRoce()) {
            return new GidChoice(-1, "LID " + pa.lid() + " (InfiniBand)");
        }
        if (peer != null) {
            InetAddress local = localAddressTowards(peer);
            if (local instanceof Inet4Address && !local.isAnyLocalAddress()) {
                try {
                    GidEntry e = ctx.roceV2Gid(port, local);
                    return new GidChoice(e.index(), "GID index " + e.index() + " (RoCE v2 of " + local.getHostAddress()
                            + ", the local address towards " + peer.getHostAddress() + ")");
                } catch (VerbsException ignored) {
                    // fall through to the local-interface and first-entry choices
                }
            }
        }
        List<GidEntry> table = ctx.gidTable(port);
        for (GidEntry e : table) {
            Optional<String> ip = ipv4Of(e);
            if (e.type() == GidType.ROCE_V2 && ip.isPresent() && isLocalAddress(ip.get())) {
                return new GidChoice(e.index(), "GID index " + e.index() + " (RoCE v2 of local IPv4 " + ip.get() + ")");
            }
        }
        GidEntry first = ctx.firstRoceV2Ipv4Gid(port).orElseThrow(() -> new VerbsException("ibv_query_gid_ex",
                org.verbs4j.natives.Errno.ENOENT, "port " + port + " of " + ctx.deviceName()
                + " has no RoCE v2 IPv4 GID (table: " + table + ")", "give its net device an IPv4 address, or pass -x"));
        return new GidChoice(first.index(), "GID index " + first.index() + " (first RoCE v2 IPv4 GID "
                + ipv4Of(first).orElse("?") + ")");
    }

    private static InetAddress localAddressTowards(InetAddress peer) {
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(peer, 9); // no packet is sent: this only asks the kernel for the route's source address
            return s.getLocalAddress();
        } catch (IOException e) {
            return null;
        }
    }

    private static boolean isLocalAddress(String ip) {
        try {
            return NetworkInterface.getByInetAddress(InetAddress.getByName(ip)) != null;
        } catch (IOException e) {
            return false;
        }
    }

    // ---- running a test --------------------------------------------------------------------

    /** The out-of-band peer of a client/server run; null in loopback. */
    private static OutOfBandChannel channel(Options o, ServerSocket listener, InetAddress peer) {
        if (o.role == Role.SERVER) {
            OUT.printf("verbs-perf %s: waiting for a client on TCP port %d (up to %d s)%n", o.test, o.tcpPort,
                    o.timeoutSeconds);
            return OutOfBandChannel.accept(listener, o.timeout());
        }
        return OutOfBandChannel.connect(new InetSocketAddress(peer, o.tcpPort), o.timeout());
    }

    static void runTest(Options o) {
        InetAddress peer = null;
        if (o.role == Role.CLIENT) {
            try {
                peer = InetAddress.getByName(o.host);
            } catch (IOException e) {
                throw new UsageException("cannot resolve " + o.host + ": " + e.getMessage());
            }
        }
        ServerSocket listener = null;
        try {
            if (o.role == Role.SERVER) {
                // listen before opening the device, so an early client's retries find us quickly
                listener = new ServerSocket();
                listener.setReuseAddress(true);
                listener.bind(new InetSocketAddress(o.tcpPort));
            }
            try (Context ctx = o.device != null ? Verbs.open(o.device) : Verbs.openFirst();
                 ProtectionDomain pd = ctx.allocateProtectionDomain()) {
                GidChoice gid = chooseGid(ctx, o.ibPort, o, peer);
                ConnectOptions co = gid.index() >= 0 ? ConnectOptions.roce(gid.index()) : ConnectOptions.infiniband();
                int[] sizes = o.sizesOrDefault();
                int maxSize = Arrays.stream(sizes).max().orElseThrow();
                int sendDepth = o.bandwidth() ? Math.max(o.txDepth, o.postList) : 64;
                int recvDepth = o.test.equals("send_lat") ? 64 : 0;
                long timeoutNanos = o.timeout().toNanos();
                if (o.role == Role.LOOPBACK) {
                    try (PerfSide a = new PerfSide("client", pd, maxSize, sendDepth, o.postList, recvDepth, timeoutNanos);
                         PerfSide b = new PerfSide("server", pd, maxSize, sendDepth, o.postList, recvDepth, timeoutNanos)) {
                        QueuePairEndpoint ea = a.init(o.ibPort, gid.index(), psn());
                        QueuePairEndpoint eb = b.init(o.ibPort, gid.index(), psn());
                        if (recvDepth > 0) {
                            a.postReceives(recvDepth, (int) a.slot);
                            b.postReceives(recvDepth, (int) b.slot);
                        }
                        a.connect(ea, b.connectionData(eb), co);
                        b.connect(eb, a.connectionData(ea), co);
                        header(o, ctx, gid, co, a, "loopback (two QPs: " + ea.qpNumber() + " <-> " + eb.qpNumber() + ")");
                        for (int size : sizes) {
                            a.buffer.fill((byte) 0);
                            b.buffer.fill((byte) 0);
                            runSize(o, size, a, b, null);
                        }
                    }
                } else {
                    try (OutOfBandChannel ch = channel(o, listener, peer);
                         PerfSide s = new PerfSide(o.role == Role.CLIENT ? "client" : "server", pd, maxSize, sendDepth,
                                 o.postList, recvDepth, timeoutNanos)) {
                        if (o.role == Role.CLIENT) {
                            ch.sendLong(o.fingerprint());
                            ch.barrier("config");
                        } else {
                            long theirs = ch.receiveLong();
                            ch.barrier("config");
                            if (theirs != o.fingerprint()) {
                                throw new IllegalStateException("the client runs another test, sizes, iterations or "
                                        + "warm-up than this server (give both the same options)");
                            }
                        }
                        QueuePairEndpoint local = s.init(o.ibPort, gid.index(), psn());
                        if (recvDepth > 0) {
                            s.postReceives(recvDepth, (int) s.slot);
                        }
                        ConnectionData remote = ch.exchange(s.connectionData(local));
                        s.connect(local, remote, co);
                        ch.barrier("connected");
                        header(o, ctx, gid, co, s, (o.role == Role.CLIENT ? "client of " + o.host : "server")
                                + " (QP " + local.qpNumber() + " <-> " + remote.endpoint().qpNumber() + ")");
                        for (int size : sizes) {
                            s.buffer.fill((byte) 0);
                            ch.barrier("start " + size);
                            runSize(o, size, o.role == Role.CLIENT ? s : null, o.role == Role.SERVER ? s : null, ch);
                            ch.barrier("done " + size);
                        }
                    }
                }
                OUT.println("---------------------------------------------------------------------------------------");
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on TCP port " + o.tcpPort + ": " + e.getMessage(), e);
        } finally {
            if (listener != null) {
                try {
                    listener.close();
                } catch (IOException ignored) {
                    // closing a listener
                }
            }
        }
    }

    private static int psn() {
        return ThreadLocalRandom.current().nextInt(1 << 24);
    }

    private static void header(Options o, Context ctx, GidChoice gid, ConnectOptions co, PerfSide s, String mode) {
        PortAttributes pa = ctx.queryPort(o.ibPort);
        String title = switch (o.test) {
            case "write_bw" -> "RDMA_Write BW Test";
            case "read_bw" -> "RDMA_Read BW Test";
            case "write_lat" -> "RDMA_Write Latency Test";
            default -> "Send Latency Test";
        };
        OUT.println("---------------------------------------------------------------------------------------");
        OUT.printf("                    %s (verbs4j)%n", title);
        OUT.printf(" Device         : %s port %d, %s, %s%n", ctx.deviceName(), o.ibPort, pa.linkLayer(), mode);
        OUT.printf(" Connection     : RC, %s, MTU %d (active %d), retry %d, rnr retry %d, timeout %d%n",
                gid.description(), Math.min(pa.activeMtu().bytes(), co.mtu() == null ? Integer.MAX_VALUE : co.mtu().bytes()),
                pa.activeMtu().bytes(), co.retryCount(), co.rnrRetry(), co.timeout());
        if (o.bandwidth()) {
            OUT.printf(" Parameters     : tx depth %d, cq mod %d, post list %d, max_rd_atomic %s, iterations %d%n",
                    o.txDepth, o.cqModOrDefault(), o.postList, o.test.equals("read_bw") ? "device max (<= 16)" : "-",
                    o.iterationsOrDefault());
        } else {
            OUT.printf(" Parameters     : iterations %d, inline no, signaled every send%n", o.iterationsOrDefault());
        }
        OUT.printf(" Warm-up        : untimed rounds of %d iterations for %s s per size%n", o.warmup, o.warmupSeconds);
        OUT.printf(" Java           : checked %s, critical downcalls %s, JDK %s%n", Verbs.CHECKED ? "yes" : "no",
                InlineVerbs.CRITICAL ? "yes" : "no", Runtime.version());
        OUT.println("---------------------------------------------------------------------------------------");
        if (o.role == Role.SERVER) {
            OUT.println(" (server: the client prints the results)");
        } else if (o.bandwidth()) {
            OUT.println(" #bytes     #iterations    BW average[MB/sec]   BW average[Gb/sec]   MsgRate[Mpps]");
        } else {
            OUT.println(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
                    + "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]");
        }
    }

    /** One size: {@code client} and/or {@code server} are the local sides (both in loopback). */
    private static void runSize(Options o, int size, PerfSide client, PerfSide server, OutOfBandChannel ch) {
        int n = o.iterationsOrDefault();
        switch (o.test) {
            case "write_bw", "read_bw" -> {
                if (client != null) {
                    boolean read = o.test.equals("read_bw");
                    if (o.warmup > 0) { // the client alone drives a bandwidth test: its own warm-up
                        long until = System.nanoTime() + o.warmupNanos();
                        do {
                            PerfLoops.bandwidth(client, read, size, o.warmup, o.txDepth, o.cqModOrDefault(), o.postList);
                        } while (System.nanoTime() - until < 0);
                    }
                    long ns = PerfLoops.bandwidth(client, read, size, n, o.txDepth, o.cqModOrDefault(), o.postList);
                    double seconds = ns / 1e9;
                    double bytes = (double) size * n;
                    OUT.printf(Locale.ROOT, " %-10d %-14d %-20.2f %-20.4f %.6f%n", size, n, bytes / (1 << 20) / seconds,
                            bytes * 8 / 1e9 / seconds, n / seconds / 1e6);
                }
                // a bandwidth server only hosts the buffer; the "done" barrier waits for the client
            }
            case "write_lat", "send_lat" -> {
                boolean send = o.test.equals("send_lat");
                if (o.warmup > 0) {
                    // rounds until the client's warm-up time passed; a remote client tells the
                    // server after each round whether another follows
                    long until = System.nanoTime() + o.warmupNanos();
                    boolean more = true;
                    while (more) {
                        PerfLoops.roundTrips(client, server, send, size, o.warmup, null);
                        if (client != null) {
                            more = System.nanoTime() - until < 0;
                            if (ch != null) {
                                ch.sendLong(more ? 1 : 0);
                            }
                        } else {
                            more = ch.receiveLong() != 0;
                        }
                    }
                }
                long[] rtt = client != null ? new long[n] : null;
                PerfLoops.roundTrips(client, server, send, size, n, rtt);
                PerfLoops.drain(client);
                PerfLoops.drain(server);
                if (rtt != null) {
                    printLatency(size, n, rtt);
                }
            }
            default -> throw new IllegalStateException(o.test);
        }
    }

    static void printLatency(int size, int n, long[] rttNanos) {
        long[] s = rttNanos.clone();
        Arrays.sort(s);
        double half = 2000.0; // ns of a round trip -> usec of a half round trip
        double sum = 0;
        for (long v : s) {
            sum += v;
        }
        double avg = sum / s.length;
        double var = 0;
        for (long v : s) {
            var += (v - avg) * (v - avg);
        }
        double stdev = Math.sqrt(var / s.length);
        OUT.printf(Locale.ROOT, " %-7d %-10d %-14.2f %-14.2f %-16.2f %-14.2f %-16.2f %-22.2f %.2f%n", size, n,
                s[0] / half, s[s.length - 1] / half, s[s.length / 2] / half, avg / half, stdev / half,
                s[Math.min(s.length - 1, (int) Math.ceil(s.length * 0.99) - 1)] / half,
                s[Math.min(s.length - 1, (int) Math.ceil(s.length * 0.999) - 1)] / half);
    }
}
