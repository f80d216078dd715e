package org.verbs4j.perf;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import org.verbs4j.Access;
import org.verbs4j.ConnectOptions;
import org.verbs4j.Context;
import org.verbs4j.Gid;
import org.verbs4j.Mtu;
import org.verbs4j.PortAttributes;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendOperation;
import org.verbs4j.ThreadDomain;
import org.verbs4j.Verbs;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.RdmaConnection;
import org.verbs4j.natives.InlineVerbs;

/**
 * Runs one perftest-compatible test: the device, the {@link PerfConnection} (perftest's TCP
 * exchange), one {@link PerfSide}, and the test's sequence of exchanges and barriers, which is
 * the same test's sequence in perftest 4.5 (so that either side may be perftest):
 * <pre>
 *   all:        negotiate; connection records, one per QP (-q; twice for write_lat, read_lat,
 *               atomic_lat); connect the QPs (INIT, RTR, RTS); the records once more per QP and
 *               a barrier (send tests: the barrier first)
 *   write_bw, read_bw, atomic_bw:
 *               client: sizes, back to back; barrier; report exchange; close (barrier + "done")
 *               server: barrier; report exchange (prints the client's); close
 *               -b: both sides, per size: barrier; run (with -a: barrier); report exchange,
 *               each prints the sum; then close
 *   send_bw:    per size: (server posts receives; -b: both) barrier; run (-b: report exchange,
 *               except with -D; with -a: barrier); close
 *   -D SEC:     the bandwidth runs last SEC seconds (PerfDuration) instead of -n operations
 *   write_lat:  per size: ping-pong, the server first; no close
 *   read_lat, atomic_lat: client: sizes; close. server: close
 *   send_lat:   per size: both post receives; barrier; ping-pong, the client first; close
 * </pre>
 * One thread.
 */
public final class PerfRunner {
    static final int PAGE = 4096;
    static final int CACHE_LINE = 64;

    private final PerfOptions o;
    private final PrintStream out;

    public PerfRunner(PerfOptions o, PrintStream out) {
        this.o = o;
        this.out = out;
    }

    public void run() {
        o.test = PerfTest.of(o.testName); // an unknown test fails before anything opens
        PerfModes.check(o); // and so do misused -q, -b, -D, -f
        if (o.useCuda != null) {
            o.resolveGpu();
            GpuBufferProvider.checkAvailable(); // before anything opens: the capability report's reason
        }
        InetAddress peer = o.server() ? null : resolvePeer();
        if (o.rdmaCm) {
            runRdmaCm(peer);
            return;
        }
        ServerSocket listener = o.server() ? listen() : null;
        try {
            runTcp(peer, listener);
        } finally {
            if (listener != null) {
                try {
                    listener.close(); // a second close (after accept's) does nothing
                } catch (IOException ignored) {
                    // closing
                }
            }
        }
    }

    private InetAddress resolvePeer() {
        try {
            return InetAddress.getByName(o.host);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot resolve " + o.host + ": " + e.getMessage(), e);
        }
    }

    /** The server's TCP listener on {@code -p}, for perftest's exchange. */
    private ServerSocket listen() {
        try {
            ServerSocket listener = new ServerSocket();
            listener.setReuseAddress(true);
            listener.bind(new InetSocketAddress(o.tcpPort));
            return listener;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on TCP port " + o.tcpPort + ": " + e.getMessage(), e);
        }
    }

    /** The test over perftest's TCP exchange: the device of {@code -d}, the peer's connection, then the run. */
    private void runTcp(InetAddress peer, ServerSocket listener) {
        try (Context ctx = o.device != null ? Verbs.open(o.device) : Verbs.openFirst();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                ThreadDomain td = o.noLock ? ctx.allocateThreadDomain() : null; // --no_lock
                ProtectionDomain parent = td != null ? td.allocateParentDomain(pd) : null) {
            o.resolve(ctx.deviceName());
            BufferProvider provider = BufferProvider.forOptions(o);
            PortAttributes pa = ctx.queryPort(o.ibPort);
            PerfDevices.GidChoice gid = gidChoice(ctx, pa, peer);
            boolean withGid = gid.index() >= 0;
            if (o.server()) {
                waiting();
            }
            try (PerfConnection conn = o.server()
                    ? PerftestTcpConnection.accept(listener, o.timeout(), withGid)
                    : PerftestTcpConnection.connect(new InetSocketAddress(peer, o.tcpPort), o.timeout(), withGid)) {
                runConnected(ctx, pd, parent, provider, pa, gid, conn);
            }
        }
    }

    private void waiting() {
        out.println();
        out.println("************************************");
        out.println("* Waiting for client to connect... *");
        out.println("************************************");
        out.flush();
    }

    /** The GID: {@code -x}, the LID on IB, else the one that reaches the peer (perftest's choice). */
    private PerfDevices.GidChoice gidChoice(Context ctx, PortAttributes pa, InetAddress peer) {
        return o.gidIndex >= 0 || !pa.isRoce()
                ? new PerfDevices.GidChoice(o.gidIndex, o.gidIndex >= 0 ? "GID index " + o.gidIndex + " (-x)" : "LID")
                : PerfDevices.chooseGid(ctx, o.ibPort, -1, peer);
    }

    /**
     * {@code -R}: the conversation and the test's QP over rdma_cm ({@link PerftestCmConnection});
     * the device is the one rdma_cm picks for the address (as perftest: {@code -d} is not used).
     */
    private void runRdmaCm(InetAddress peer) {
        o.resolveRdmaCm();
        try (PerftestCmConnection conn = o.server()
                ? PerftestCmConnection.accept(o.tcpPort, o.timeout(), this::waiting)
                : PerftestCmConnection.connect(o.host, o.tcpPort, o.timeout())) {
            Context ctx = conn.context(); // librdmacm's, not closed here
            try (ProtectionDomain pd = ctx.allocateProtectionDomain()) {
                o.resolve(ctx.deviceName());
                BufferProvider provider = BufferProvider.forOptions(o);
                PortAttributes pa = ctx.queryPort(o.ibPort);
                PerfDevices.GidChoice gid = gidChoice(ctx, pa, peer);
                runConnected(ctx, pd, null, provider, pa, gid, conn);
            }
        }
    }

    /**
     * What the negotiation with the peer and the options fix for a run: the device and port, the GID,
     * the MTU, the buffer's cycle and cache line, the QPs' type and depths, the outstanding reads.
     */
    private record Setup(
            Context ctx,
            PortAttributes pa,
            PerfDevices.GidChoice gid,
            Mtu mtu,
            int cycle,
            int cacheLine,
            boolean ud,
            QueuePairType type,
            int recvDepth,
            int sendDepth,
            int outReads) {}

    /** Each QP's local endpoint and connection record, the peer's records, and the peer's record that counts. */
    private record Records(QueuePairEndpoint[] locals, KeyMessage[] mine, KeyMessage[] peers, KeyMessage peer) {}

    /**
     * The run on a connected peer: the buffer registered on {@code pd}, the QPs created on
     * {@code parent} ({@code --no_lock}: a parent domain of a thread domain, the regions of
     * {@code pd} serving them) or on {@code pd} ({@code parent} null), or by rdma_cm ({@code -R}).
     */
    private void runConnected(
            Context ctx,
            ProtectionDomain pd,
            ProtectionDomain parent,
            BufferProvider provider,
            PortAttributes pa,
            PerfDevices.GidChoice gid,
            PerfConnection conn) {
        Setup s = setup(ctx, pa, gid, conn);
        PerftestCmConnection cm = conn instanceof PerftestCmConnection c ? c : null;
        // UD: room for each receive's GRH in front of a cache-line-aligned payload (UdTransport)
        int maxMessage = o.maxSize() + (s.ud() ? s.cacheLine() : 0);
        try (PerfSide side = new PerfSide(
                pd,
                provider,
                s.type(),
                o.qps,
                maxMessage,
                s.cycle(),
                s.sendDepth(),
                o.postList,
                s.recvDepth(),
                o.inline,
                o.timeout().toNanos(),
                cm != null ? cmQpSource(cm, pd, s) : onDomain(parent != null ? parent : pd),
                cm == null ? null : cm::closeData,
                o.newPostSend)) {
            Records r = exchangeRecords(side, conn, cm, s);
            connectQps(side, pd, cm, s, r);
            banner(s, provider, conn);
            for (KeyMessage m : r.mine()) {
                out.printf(" local address: %s%n", m);
            }
            lastExchange(conn, r);
            PerfReporter rep = new PerfReporter(out);
            fillTestInfo(rep.testInfo(), s);
            runTest(side, conn, r.mine()[0], rep, s);
            out.println(PerfReporter.RESULT_LINE);
            if (o.outJson && !rep.root().get("results").isEmpty()) {
                rep.writeJson(Path.of(o.outJsonFile));
            }
        }
    }

    /** Negotiates with the peer (perftest's version, page, cache line, MTU) and fixes the run's {@link Setup}. */
    private Setup setup(Context ctx, PortAttributes pa, PerfDevices.GidChoice gid, PerfConnection conn) {
        PerfTest test = o.test;
        Mtu localMtu = o.mtu != null ? mtuOfBytes(o.mtu) : pa.activeMtu();
        PerfConnection.Negotiation theirs = conn.negotiate(new PerfConnection.Negotiation(
                PerftestTcpConnection.PERFTEST_VERSION, PAGE, CACHE_LINE, localMtu.value()));
        int cycle = Math.max(PAGE, theirs.cycleBuffer());
        int cacheLine = Math.max(CACHE_LINE, theirs.cacheLineSize());
        Mtu mtu = Mtu.min(localMtu, Mtu.of(Math.max(1, Math.min(5, theirs.mtuEnum()))));
        boolean ud = o.connection.equals("UD");
        if (ud) { // a datagram is at most the MTU (perftest's rule, once the MTU is negotiated)
            o.sizes = UdTransport.fitToMtu(o.sizes, o.all, o.size != null, mtu.bytes(), System.err);
        }
        boolean send = test.verb() == PerfTest.Verb.SEND;
        boolean rd = test.verb() == PerfTest.Verb.READ || test.verb() == PerfTest.Verb.ATOMIC;
        int recvDepth = send ? (int) (o.duration != null ? o.rxDepth : Math.min(o.rxDepth, o.iterations)) : 0;
        int sendDepth = Math.max(2, o.tx);
        int devOutReads = Math.max(1, Math.min(255, ctx.queryDevice().maxQpRdAtom())); // perftest: the device maximum
        int outReads = rd ? Math.min(devOutReads, o.outReads != null ? o.outReads : devOutReads) : 1;
        QueuePairType type = ud ? QueuePairType.UD : o.connection.equals("UC") ? QueuePairType.UC : QueuePairType.RC;
        return new Setup(ctx, pa, gid, mtu, cycle, cacheLine, ud, type, recvDepth, sendDepth, outReads);
    }

    /**
     * The data QPs on {@code domain} (the PD, or with {@code --no_lock} its parent domain), with
     * {@code --use_new_post_send} of the extended API for the operations of the test.
     */
    private PerfSide.QpSource onDomain(ProtectionDomain domain) {
        Set<SendOperation> ops = o.newPostSend ? operations(o.test) : null;
        return (cq, init, count) -> {
            QueuePair[] q = new QueuePair[count];
            try {
                for (int i = 0; i < count; i++) {
                    q[i] = ops != null ? domain.createExtendedQueuePair(init, ops) : domain.createQueuePair(init);
                }
            } catch (RuntimeException e) {
                for (QueuePair made : q) {
                    if (made != null) {
                        made.close();
                    }
                }
                throw e;
            }
            return q;
        };
    }

    /** What a test posts, for {@code ibv_create_qp_ex}'s send-ops flags. */
    static Set<SendOperation> operations(PerfTest test) {
        return switch (test.verb()) {
            case WRITE -> EnumSet.of(SendOperation.RDMA_WRITE);
            case READ -> EnumSet.of(SendOperation.RDMA_READ);
            case SEND -> EnumSet.of(SendOperation.SEND);
            case ATOMIC -> EnumSet.of(SendOperation.ATOMIC_CMP_AND_SWP, SendOperation.ATOMIC_FETCH_AND_ADD);
        };
    }

    /** {@code -R}: the data QPs come from rdma_cm, connected already (GID and MTU from the route). */
    private PerfSide.QpSource cmQpSource(PerftestCmConnection cm, ProtectionDomain pd, Setup s) {
        return (cq, init, count) -> {
            RdmaConnection[] cs = cm.connectData(
                    new ConnectionSetup()
                            .protectionDomain(pd)
                            .completionQueues(cq, cq)
                            .maxSendWr(s.sendDepth())
                            .maxRecvWr(Math.max(1, s.recvDepth()))
                            .maxInlineData(o.inline)
                            .remoteAccess(EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC))
                            .responderResources(s.outReads())
                            .initiatorDepth(s.outReads())
                            // GID and MTU come from the route
                            .connectOptions(perftestRetries(ConnectOptions.roce(0))),
                    count,
                    new KeyMessage(0, 0, 0, 0, 0, 0, null, 0));
            QueuePair[] qs = new QueuePair[cs.length];
            for (int i = 0; i < cs.length; i++) {
                qs[i] = cs[i].queuePair();
            }
            return qs;
        };
    }

    /** Brings each QP to INIT (UD: to RTS), and exchanges the connection records, one per QP (twice for the latency tests but send_lat). */
    private Records exchangeRecords(PerfSide side, PerfConnection conn, PerftestCmConnection cm, Setup s) {
        PerfTest test = o.test;
        int nq = o.qps;
        int psn = ThreadLocalRandom.current().nextInt(1 << 24);
        KeyMessage[] mineAll = new KeyMessage[nq];
        KeyMessage[] peers = new KeyMessage[nq];
        QueuePairEndpoint[] locals = new QueuePairEndpoint[nq];
        for (int i = 0; i < nq; i++) {
            int p = i == 0 ? psn : ThreadLocalRandom.current().nextInt(1 << 24);
            locals[i] = s.ud()
                    ? UdTransport.activate(side, o.ibPort, s.gid().index(), p) // UD: one QP (PerfModes)
                    : cm == null
                            ? side.init(i, o.ibPort, s.gid().index(), p, s.type() == QueuePairType.UC)
                            : side.qps[i].localEndpoint(s.gid().index(), p); // rdma_cm's QP is connected already
            mineAll[i] = new KeyMessage(
                    locals[i].lid(),
                    s.outReads(),
                    side.qps[i].qpNumber(),
                    locals[i].psn(),
                    side.mr.rkey(),
                    side.localVaddr(i),
                    locals[i].gid() != null ? locals[i].gid().toBytes() : null,
                    0);
        }
        for (int i = 0; i < nq; i++) { // perftest: one record per QP
            peers[i] = conn.exchangeKeys(mineAll[i]);
        }
        KeyMessage peer = peers[0];
        if (!test.bandwidth() && test.verb() != PerfTest.Verb.SEND) {
            peer = conn.exchangeKeys(mineAll[0]); // write_lat, read_lat, atomic_lat exchange the records twice
        }
        return new Records(locals, mineAll, peers, peer);
    }

    /** Connects each QP to the peer's (INIT, RTR, RTS; UD: the address handle; rdma_cm: only the remote buffer). */
    private void connectQps(PerfSide side, ProtectionDomain pd, PerftestCmConnection cm, Setup s, Records r) {
        PerfTest test = o.test;
        int gidIndex = s.gid().index();
        QueuePairEndpoint local = r.locals()[0];
        byte[] gidBytes = local.gid() != null ? local.gid().toBytes() : null;
        KeyMessage peer = r.peer();
        if (cm == null && gidBytes != null && isV4Mapped(gidBytes) != isV4Mapped(peer.gid())) {
            throw new IllegalStateException(
                    "the GID types differ (one IPv4-mapped, one not): use the same IP version " + "on both sides (-x)");
        }
        boolean rd = test.verb() == PerfTest.Verb.READ || test.verb() == PerfTest.Verb.ATOMIC;
        ConnectOptions co = perftestRetries(gidIndex >= 0 ? ConnectOptions.roce(gidIndex) : ConnectOptions.infiniband())
                .withMtu(s.mtu())
                .withMaxRdAtomic(rd ? Math.min(s.outReads(), Math.max(1, peer.outReads())) : 0);
        if (s.ud()) { // every client sends, and both sides of send_lat and of -b
            UdTransport.connect(
                    side,
                    pd,
                    o.ibPort,
                    gidIndex,
                    peer,
                    !o.server() || !test.bandwidth() || o.bidirectional,
                    s.cacheLine());
        }
        for (int i = 0; i < o.qps && !s.ud(); i++) {
            KeyMessage pi = i == 0 ? peer : r.peers()[i];
            if (cm == null) {
                side.connect(
                        i,
                        r.locals()[i],
                        new QueuePairEndpoint(
                                pi.qpn(), pi.psn(), pi.lid(), pi.gid() != null ? Gid.of(pi.gid()) : null, s.mtu()),
                        pi.vaddr(),
                        pi.rkey(),
                        co);
            } else {
                side.target(i, pi.vaddr(), pi.rkey());
            }
        }
    }

    /**
     * perftest: the records once more per QP, with one barrier (before them in send tests, after otherwise);
     * the JIT settles where the peer waits untimed.
     */
    private void lastExchange(PerfConnection conn, Records r) {
        PerfTest test = o.test;
        KeyMessage mine = r.mine()[0];
        if (test.verb() == PerfTest.Verb.SEND) {
            conn.sync(mine);
        }
        for (int i = 0; i < o.qps; i++) {
            KeyMessage again = conn.exchangeKeys(r.mine()[i]);
            out.printf(" remote address: %s%n", o.qps == 1 ? r.peer() : again);
        }
        if (test.verb() != PerfTest.Verb.SEND) {
            if (o.server() && test == PerfTest.WRITE_LAT) {
                settleJit(); // before the barrier: the peer waits in it, untimed
            }
            conn.sync(mine);
        }
        if (!o.server()) {
            settleJit(); // the setup above made methods hot: their compilation ends before timing
        }
    }

    /** The test's timed runs, one per size, each reported as it ends. */
    private void runTest(PerfSide side, PerfConnection conn, KeyMessage mine, PerfReporter rep, Setup s) {
        switch (o.test) {
            case WRITE_BW, READ_BW, ATOMIC_BW -> oneSidedBandwidth(side, conn, mine, rep, s.cycle(), s.cacheLine());
            case SEND_BW -> sendBandwidth(side, conn, mine, rep, s.cycle(), s.cacheLine());
            case WRITE_LAT -> writeLatency(side, rep);
            case READ_LAT, ATOMIC_LAT -> readLatency(side, conn, mine, rep);
            case SEND_LAT -> sendLatency(side, conn, mine, rep, s.recvDepth());
        }
    }

    /** write_lat: per size a ping-pong, the server first; no close. */
    private void writeLatency(PerfSide side, PerfReporter rep) {
        rep.header(false, false);
        for (int size : o.sizes) {
            long[] tposted = new long[(int) o.iterations];
            LoopCpu cpu = loopCpuBefore();
            PerfLoops.pingPong(
                    side, false, o.server(), size, o.iterations, inlineSource(side, size), tposted, label(size));
            loopCpuAfter(cpu);
            rep.lat(LatReport.of(size, o.iterations, tposted, o.test.rttFactor()));
        }
    }

    /** read_lat, atomic_lat: the client's runs, one per size; then both close. */
    private void readLatency(PerfSide side, PerfConnection conn, KeyMessage mine, PerfReporter rep) {
        if (!o.server()) {
            rep.header(false, false);
            for (int size : o.sizes) {
                long[] tposted = new long[(int) o.iterations];
                LoopCpu cpu = loopCpuBefore();
                PerfLoops.readLatency(side, o.test.verb(), cas(), size, o.iterations, tposted, label(size));
                loopCpuAfter(cpu);
                rep.lat(LatReport.of(size, o.iterations, tposted, o.test.rttFactor()));
            }
        }
        conn.finish(mine);
    }

    /** send_lat: per size both post receives, a barrier, a ping-pong (the client first); then close. */
    private void sendLatency(PerfSide side, PerfConnection conn, KeyMessage mine, PerfReporter rep, int recvDepth) {
        rep.header(false, false);
        for (int size : o.sizes) {
            long[] tposted = new long[(int) o.iterations];
            side.startReceives(o.iterations, recvDepth, size, false);
            if (o.server()) {
                settleJit();
            }
            conn.sync(mine);
            LoopCpu cpu = loopCpuBefore();
            PerfLoops.pingPong(
                    side, true, !o.server(), size, o.iterations, inlineSource(side, size), tposted, label(size));
            loopCpuAfter(cpu);
            rep.lat(LatReport.of(size, o.iterations, tposted, o.test.rttFactor()));
        }
        conn.finish(mine);
    }

    private void oneSidedBandwidth(
            PerfSide side, PerfConnection conn, KeyMessage mine, PerfReporter rep, int cycle, int cacheLine) {
        rep.header(true, o.reportGbits);
        if (o.server() && !o.bidirectional) {
            conn.sync(mine);
            BwReport theirs = conn.exchangeReport(new BwReport(0, 0, 0, 0, 0));
            rep.bw(theirs, o.reportGbits);
            conn.finish(mine);
            return;
        }
        // the client, and with -b both sides (perftest: both run the client's loop)
        BwReport last = new BwReport(0, 0, 0, 0, 0);
        int n = (int) o.iterations;
        int total = n * o.qps;
        long[] tposted = o.duration == null ? new long[total] : null;
        long[] tcompleted = o.duration == null ? new long[total] : null;
        for (int size : o.sizes) {
            MemorySegment inl = inlineSource(side, size);
            if (o.warmUp) {
                int w = Math.max(o.tx, o.postList);
                PerfLoops.bandwidth(
                        side,
                        o.test.verb(),
                        cas(),
                        size,
                        w,
                        o.tx,
                        Math.min(o.cq, w),
                        o.postList,
                        inl,
                        cycle,
                        cacheLine,
                        new long[w * o.qps],
                        new long[w * o.qps],
                        "warm-up",
                        o.timeout().toNanos());
            }
            if (o.bidirectional) {
                conn.sync(mine);
            }
            PerfDuration d = PerfModes.duration(o);
            LoopCpu cpu = loopCpuBefore();
            PerfLoops.bandwidth(
                    side,
                    o.test.verb(),
                    cas(),
                    size,
                    n,
                    o.tx,
                    o.cq,
                    o.postList,
                    inl,
                    cycle,
                    cacheLine,
                    tposted,
                    tcompleted,
                    label(size),
                    o.timeout().toNanos(),
                    d,
                    false,
                    false);
            loopCpuAfter(cpu);
            if (o.bidirectional && o.all) {
                conn.sync(mine); // perftest (version 4.6 and up): a barrier after each size of -a -b
            }
            last = d != null
                    ? d.report(size, o.reportGbits)
                    : BwCalc.client(size, total, tposted, tcompleted, o.cq, o.postList, o.reportGbits);
            rep.bw(o.bidirectional ? PerfModes.sum(last, conn.exchangeReport(last)) : last, o.reportGbits);
        }
        if (!o.bidirectional) {
            conn.sync(mine);
            conn.exchangeReport(last);
        }
        conn.finish(mine);
    }

    /**
     * perftest's retry settings on a data QP, over TCP and rdma_cm alike: RNR retry 7, forever (a
     * send_bw receiver reposting slowly, as under -D, then only slows the sender down), and -u's
     * ACK timeout; its transport retry count of 7 stays refused by verbs4j (6).
     */
    private ConnectOptions perftestRetries(ConnectOptions base) {
        return base.withRnrRetryForever().withTimeout(o.qpTimeout);
    }

    /** The JVM's uptime (ms) and its other threads' CPU time at the start of a timed loop. */
    private record LoopCpu(long uptime, java.util.Map<String, Long> threads, long[] own) {}

    /** With {@code --jit_settle}: the other threads' CPU time before a timed loop (null otherwise). */
    private LoopCpu loopCpuBefore() {
        return o.jitSettle > 0
                ? new LoopCpu(
                        java.lang.management.ManagementFactory.getRuntimeMXBean()
                                .getUptime(),
                        JitSettle.otherThreadsMillis(),
                        JitSettle.ownUserSystemMillis())
                : null;
    }

    /**
     * With {@code --jit_settle}: what the JVM's other threads (compiler, GC, VM) ran during the
     * loop, on the CPU the loop shares with them, to the log (standard error).
     */
    private void loopCpuAfter(LoopCpu before) {
        if (before != null) {
            long[] own = JitSettle.ownUserSystemMillis();
            System.err.printf(
                    " the loop's thread: user %d ms, system %d ms; other JVM threads during the loop (JVM uptime "
                            + "%.3f-%.3f s): %s%n",
                    own[0] - before.own()[0],
                    own[1] - before.own()[1],
                    before.uptime() / 1e3,
                    java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime() / 1e3,
                    JitSettle.otherThreadsDelta(before.threads(), JitSettle.otherThreadsMillis()));
        }
    }

    /**
     * {@code --jit_settle}: waits (no traffic) until this JVM's compiler threads are idle. A client waits after the
     * last barrier, before its timed loop; a server whose loop is timed (write_lat, send_lat, the send_bw receiver)
     * waits just before that barrier, where its peer waits untimed.
     */
    private void settleJit() {
        if (o.jitSettle <= 0) {
            return;
        }
        try {
            System.err.println(" " + JitSettle.await(Duration.ofSeconds(o.jitSettle)) + " (--jit_settle, before the "
                    + (o.server() ? "barrier before the loop)" : "loop)"));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the JIT", e);
        }
    }

    private void sendBandwidth(
            PerfSide side, PerfConnection conn, KeyMessage mine, PerfReporter rep, int cycle, int cacheLine) {
        rep.header(true, o.reportGbits);
        boolean duplex = o.bidirectional;
        boolean timed = o.duration != null;
        boolean sender = !o.server() || duplex;
        int n = (int) o.iterations;
        int total = n * o.qps;
        long[] tposted = sender && !timed ? new long[total] : null;
        long[] tcompleted = sender && !timed ? new long[total] : null;
        for (int size : o.sizes) {
            if (o.server() || duplex) {
                side.startReceives(
                        timed ? Long.MAX_VALUE : n, timed ? o.rxDepth : Math.min(o.rxDepth, n), size, !sender);
            }
            if (o.server() && !duplex) {
                settleJit(); // the receiver's loop is timed too: settle before the barrier, where the sender waits
                // untimed
            }
            conn.sync(mine);
            PerfDuration d = PerfModes.duration(o);
            BwReport r;
            LoopCpu cpu = loopCpuBefore();
            if (sender) {
                // -b: both send and receive (perftest's run_iter_bi); the server sends after its first receive
                PerfLoops.bandwidth(
                        side,
                        PerfTest.Verb.SEND,
                        false,
                        size,
                        n,
                        o.tx,
                        o.cq,
                        o.postList,
                        inlineSource(side, size),
                        cycle,
                        cacheLine,
                        tposted,
                        tcompleted,
                        label(size),
                        o.timeout().toNanos(),
                        d,
                        duplex,
                        duplex && o.server());
                r = d != null
                        ? d.report(size, o.reportGbits)
                        : BwCalc.client(size, total, tposted, tcompleted, o.cq, o.postList, o.reportGbits);
            } else {
                PerfLoops.receiveAll(side, n, label(size), o.timeout().toNanos(), d);
                r = d != null
                        ? d.report(size, o.reportGbits)
                        : BwCalc.receiver(size, total, side.firstRecvNanos, side.lastRecvNanos, o.reportGbits);
            }
            loopCpuAfter(cpu);
            // perftest: -b sums both sides' reports, except in duration mode (each counted both directions)
            rep.bw(duplex && !timed ? PerfModes.sum(r, conn.exchangeReport(r)) : r, o.reportGbits);
            if (o.all) {
                conn.sync(mine);
            }
        }
        conn.finish(mine);
    }

    private boolean cas() {
        return o.atomicType.equals("CMP_AND_SWAP");
    }

    private MemorySegment inlineSource(PerfSide side, int size) {
        return size <= o.inline ? side.buffer.asSlice(0, size) : null;
    }

    private String label(int size) {
        return o.test.cliName() + " " + size + " B";
    }

    private static boolean isV4Mapped(byte[] g) {
        if (g == null) {
            return false;
        }
        for (int i = 0; i < 10; i++) {
            if (g[i] != 0) {
                return false;
            }
        }
        return (g[10] & 0xff) == 0xff && (g[11] & 0xff) == 0xff;
    }

    static Mtu mtuOfBytes(int bytes) {
        for (Mtu m : Mtu.values()) {
            if (m.bytes() == bytes) {
                return m;
            }
        }
        throw new IllegalArgumentException("no MTU of " + bytes + " bytes");
    }

    private void banner(Setup s, BufferProvider provider, PerfConnection conn) {
        PerfTest t = o.test;
        out.println(PerfReporter.RESULT_LINE);
        out.printf("                    %s%n", PerfModes.title(t.title(o.atomicType), o.bidirectional));
        out.printf(" Dual-port       : OFF\t\tDevice         : %s%n", s.ctx().deviceName());
        out.printf(" Number of qps   : %d\t\tTransport type : IB%n", o.qps);
        out.printf(" Connection type : %s\t\tUsing SRQ      : OFF%n", o.connection);
        if (o.noLock) {
            out.printf(" Thread domain   : ON (QPs on a parent domain, --no_lock)%n");
        }
        out.printf(" Post send API   : %s%n", o.newPostSend ? "extended (ibv_wr_*)" : "classic (ibv_post_send)");
        if (printsTxDepth(o)) {
            out.printf(" TX depth        : %d%n", o.tx);
        }
        if (o.postList > 1) {
            out.printf(" Post List       : %d%n", o.postList);
        }
        if (printsRxDepth(o, s.recvDepth())) {
            out.printf(" RX depth        : %d%n", s.recvDepth());
        }
        if (t.bandwidth()) {
            out.printf(" CQ Moderation   : %d%n", o.cq);
        }
        out.printf(" Mtu             : %d[B]%n", s.mtu().bytes());
        out.printf(" Link type       : %s%n", s.pa().isRoce() ? "Ethernet" : "IB");
        if (s.gid().index() >= 0) {
            out.printf(" GID index       : %d%n", s.gid().index());
        }
        if (t.verb() == PerfTest.Verb.READ || t.verb() == PerfTest.Verb.ATOMIC) {
            out.printf(" Outstand reads  : %d%n", s.outReads());
        } else {
            out.printf(" Max inline data : %d[B]%n", o.inline);
        }
        out.printf(" rdma_cm QPs\t : %s%n", o.rdmaCm ? "ON" : "OFF");
        out.printf(" Data ex. method : %s (%s)%n", o.rdmaCm ? "rdma_cm" : "Ethernet", conn.describe());
        out.printf(
                " Warm-up         : %s%n",
                o.warmUp
                        ? "--perform_warm_up (one untimed round of tx depth operations)"
                        : "none (as perftest without --perform_warm_up)");
        out.printf(
                " verbs4j         : checked %s, critical downcalls %s, %s, JDK %s%n",
                Verbs.CHECKED ? "yes" : "no",
                InlineVerbs.CRITICAL ? "yes" : "no",
                provider.describe(),
                Runtime.version());
        out.println(PerfReporter.RESULT_LINE);
    }

    /** perftest's rule for printing TX depth (ctx_print_test_info, its JSON alike): the client, or either side with -b. */
    static boolean printsTxDepth(PerfOptions o) {
        return !o.server() || o.bidirectional;
    }

    /**
     * perftest's rule for printing RX depth: a SEND test ({@code recvDepth > 0}) on the server, or
     * on either side with -b (so not on send_bw's or send_lat's client).
     */
    static boolean printsRxDepth(PerfOptions o, int recvDepth) {
        return recvDepth > 0 && (o.server() || o.bidirectional);
    }

    private void fillTestInfo(ObjectNode ti, Setup s) {
        PerfTest t = o.test;
        ti.put("test", PerfModes.jsonTitle(t.jsonName(o.atomicType), o.bidirectional));
        ti.put("Dual_port", "OFF");
        ti.put("Device", s.ctx().deviceName());
        ti.put("Number_of_qps", o.qps);
        ti.put("Transport_type", "IB");
        ti.put("Connection_type", o.connection);
        ti.put("Using_SRQ", "OFF");
        if (printsTxDepth(o)) {
            ti.put("TX_depth", o.tx);
        }
        if (o.postList > 1) {
            ti.put("Post_List", o.postList);
        }
        if (printsRxDepth(o, s.recvDepth())) {
            ti.put("RX_depth", s.recvDepth());
        }
        ti.put("CQ_Moderation", o.cq);
        ti.put("Mtu", s.mtu().bytes());
        ti.put("Link_type", s.pa().isRoce() ? "Ethernet" : "IB");
        ti.put("GID_index", s.gid().index());
        ti.put("Max_inline_data", o.inline);
        if (t.verb() == PerfTest.Verb.READ || t.verb() == PerfTest.Verb.ATOMIC) {
            ti.put("Outstand_reads", s.outReads());
        }
        ti.put("rdma_cm_QPs", o.rdmaCm ? "ON" : "OFF");
        ti.put("Data_ex_method", o.rdmaCm ? "rdma_cm" : "Ethernet");
        if (o.duration != null) {
            ti.put("Duration", o.duration);
        } else {
            ti.put("Iterations", o.iterations);
        }
        ti.put("Warm_up", o.warmUp ? "ON" : "OFF");
        ti.put("Role", o.server() ? "server" : "client");
        ti.put("Tool", "verbs-perf (verbs4j), checked " + (Verbs.CHECKED ? "ON" : "OFF"));
    }

    static String hex(byte[] b) {
        return b == null ? "-" : HexFormat.ofDelimiter(":").formatHex(b).toLowerCase(Locale.ROOT);
    }
}
