package org.verbs4j.fault;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;
import org.verbs4j.CompletionStatus;
import org.verbs4j.OutOfBandChannel;
import org.verbs4j.QueuePairAttributes;
import org.verbs4j.QueuePairState;
import org.verbs4j.WorkCompletions;

/**
 * The client of the two-host fault test (softroce/two-hosts-fault.sh), run in guest B.
 *
 * <ol>
 *   <li>Connects to the server (out-of-band connect retried until a deadline) and streams signaled
 *       RDMA WRITEs and SENDs with distinct wr_ids, keeping {@code depth} outstanding. After
 *       {@code killAfter} successful completions it writes the marker {@code streaming}; the host
 *       then SIGKILLs the server's guest, and the client keeps streaming.</li>
 *   <li>Asserts that every outstanding wr_id completes exactly once, with an error: first
 *       RETRY_EXC_ERR, then WR_FLUSH_ERR (its posted receives flush too), nothing after that, all
 *       within {@code boundS} seconds of the last success; closes everything and checks that
 *       {@code rdma res show} is back to the baseline; writes the marker {@code closed}.</li>
 *   <li>The host restarts the server; the client reconnects (new objects, new QP), RDMA-WRITEs a
 *       pattern and SENDs VERIFY; the server answers with the CRC it sees; closes and checks the
 *       baseline again.</li>
 * </ol>
 * Prints {@code Fault-tier: N passed, M failed}; exits 0 only if M == 0.
 *
 * <p>Arguments: {@code server-ip marker-dir [killAfter=2000] [depth=32] [boundS=60] [connectS=300]
 * [watchdogS=0]} (watchdogS: see {@link FaultLink#watchdog}; 0 = none).
 */
public final class FaultClient {
    private static final int RECV_BASE = 1_000_000; // wr_ids of our receives (sends count up from 1)
    private static final int WRITE_BYTES = 4096;
    private static final int RECEIVES = 4;

    private final List<String> passed = new ArrayList<>();
    private final List<String> failed = new ArrayList<>();
    private final InetSocketAddress server;
    private final Path markers;
    private final int killAfter;
    private final int depth;
    private final Duration bound;
    private final Duration connectBound;
    private final Duration watchdog;

    private FaultClient(String[] a) {
        server = new InetSocketAddress(a[0], FaultLink.PORT);
        markers = Path.of(a[1]);
        killAfter = a.length > 2 ? Integer.parseInt(a[2]) : 2000;
        depth = a.length > 3 ? Integer.parseInt(a[3]) : 32;
        bound = Duration.ofSeconds(a.length > 4 ? Long.parseLong(a[4]) : 60);
        connectBound = Duration.ofSeconds(a.length > 5 ? Long.parseLong(a[5]) : 300);
        watchdog = Duration.ofSeconds(a.length > 6 ? Long.parseLong(a[6]) : 0);
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println(
                    "usage: FaultClient server-ip marker-dir [killAfter] [depth] [boundS] [connectS] [watchdogS]");
            System.exit(2);
        }
        FaultClient c = new FaultClient(args);
        FaultLink.watchdog("fault-client", c.watchdog);
        try {
            c.run();
        } catch (Throwable t) {
            c.check(false, "no unexpected exception: " + t);
            t.printStackTrace(System.out);
        }
        System.out.println("Fault-tier: " + c.passed.size() + " passed, " + c.failed.size() + " failed");
        for (String f : c.failed) {
            System.out.println("  FAILED: " + f);
        }
        System.exit(c.failed.isEmpty() && !c.passed.isEmpty() ? 0 : 1);
    }

    private void run() {
        String dev = System.getenv().getOrDefault("VERBS4J_DEVICE", "rxe0");
        Map<String, Integer> baseline = FaultLink.resourceCounts(dev);
        log("baseline rdma res show " + dev + ": " + baseline);

        // ---- 1. stream, kill, errors --------------------------------------------------------
        log("connecting to " + server + " (deadline " + connectBound + ")");
        OutOfBandChannel ch = OutOfBandChannel.connect(server, connectBound);
        FaultLink link = null;
        try {
            link = FaultLink.connect(ch, RECEIVES);
            log("connected: QP " + link.qp.qpNumber() + " -> server QP "
                    + link.peer.endpoint().qpNumber() + "; streaming WRITE+SEND, " + depth + " outstanding");
            QueuePairAttributes qa = link.qp.query();
            double ackTimeout = 4.096e-6 * (1L << qa.timeout());
            check(
                    qa.retryCount() <= 6 && qa.timeout() > 0,
                    String.format(
                            "the retries are bounded: retry_cnt %d, "
                                    + "rnr_retry %d, ACK timeout %d (%.0f ms): a dead peer fails a request after ~%.1f s",
                            qa.retryCount(),
                            qa.rnrRetry(),
                            qa.timeout(),
                            ackTimeout * 1e3,
                            (qa.retryCount() + 1) * ackTimeout));
            if (!streamUntilFault(link)) {
                return; // an error before the kill: the restart would prove nothing
            }
        } finally {
            closeAll("phase 1", link, ch);
        }
        Map<String, Integer> after = FaultLink.resourceCounts(dev);
        check(
                after.equals(baseline),
                "after the fault every object is closed: rdma res show " + after + " equals the baseline " + baseline);
        FaultLink.marker(markers, "closed", FaultLink.elapsed());
        log("marker 'closed' written: the host restarts the server");

        // ---- 2. reconnect to the restarted server -------------------------------------------
        long t = System.nanoTime();
        OutOfBandChannel ch2;
        try {
            ch2 = OutOfBandChannel.connect(server, connectBound);
        } catch (RuntimeException e) {
            check(false, "reconnect to the restarted server within " + connectBound + ": " + e);
            return;
        }
        FaultLink link2 = null;
        try {
            link2 = FaultLink.connect(ch2, RECEIVES);
            check(
                    true,
                    String.format(
                            "reconnected to the restarted server in %.1f s (new QP %d -> server QP %d)",
                            (System.nanoTime() - t) / 1e9,
                            link2.qp.qpNumber(),
                            link2.peer.endpoint().qpNumber()));
            verifiedExchange(link2);
        } finally {
            closeAll("phase 2", link2, ch2);
        }
        Map<String, Integer> after2 = FaultLink.resourceCounts(dev);
        check(
                after2.equals(baseline),
                "after the reconnect every object is closed: rdma res show " + after2 + " equals the baseline "
                        + baseline);
        FaultLink.marker(markers, "done", FaultLink.elapsed());
    }

    /** Returns false if the connection failed before the kill (nothing more to test). */
    private boolean streamUntilFault(FaultLink link) {
        WorkCompletions wcs = link.wcs;
        Map<Long, String> outstanding = new LinkedHashMap<>();
        Map<Long, Integer> seen = new HashMap<>(); // wr_id -> completions seen (duplicates show up here)
        List<String> anomalies = new ArrayList<>(); // unknown or duplicate wr_ids, successes after an error
        List<long[]> errors = new ArrayList<>(); // {wr_id, status}, in completion order
        long next = 1;
        long successes = 0;
        long markedAt = 0;
        long lastSuccess = 0;
        long firstErrorAt = 0;
        int outstandingAtFirstError = -1;
        long streamDeadline = System.nanoTime() + Duration.ofSeconds(600).toNanos(); // no kill at all
        long progressEvery = Duration.ofSeconds(10).toNanos();
        long nextProgress = System.nanoTime() + progressEvery;
        for (int i = 0; i < FaultLink.DATA_BYTES / WRITE_BYTES; i++) {
            pattern(link.data.segment().asSlice((long) i * WRITE_BYTES, WRITE_BYTES), i);
        }
        while (true) {
            long now = System.nanoTime();
            if (firstErrorAt == 0) {
                while (outstanding.size() < depth) {
                    long id = next++;
                    if ((id & 1) == 0) {
                        link.postWrite(id, (id % (FaultLink.DATA_BYTES / WRITE_BYTES)) * WRITE_BYTES, WRITE_BYTES);
                        outstanding.put(id, "WRITE");
                    } else {
                        link.postMessage(id, (int) (id % FaultLink.SEND_SLOTS), FaultLink.DATA, id, 0, 0);
                        outstanding.put(id, "SEND");
                    }
                }
            }
            int n = link.sendCq.poll(wcs);
            for (int i = 0; i < n; i++) {
                long id = wcs.wrId(i);
                int st = wcs.status(i);
                int times = seen.merge(id, 1, Integer::sum);
                if (outstanding.remove(id) == null) {
                    anomalies.add("wr_id " + id + " completed but was not outstanding (completion #" + times + ", "
                            + CompletionStatus.text(st) + ")");
                }
                if (st == CompletionStatus.SUCCESS) {
                    successes++;
                    lastSuccess = System.nanoTime();
                    if (firstErrorAt != 0) {
                        anomalies.add("wr_id " + id + " succeeded after the first error");
                    }
                } else {
                    if (firstErrorAt == 0 && markedAt == 0) {
                        check(
                                false,
                                "no error completion before the kill: wr_id " + id + " failed with "
                                        + CompletionStatus.text(st) + " after " + successes + " successes, "
                                        + (lastSuccess == 0
                                                ? "none succeeded"
                                                : String.format(
                                                        "%.1f s after the last success",
                                                        (System.nanoTime() - lastSuccess) / 1e9))
                                        + " (" + link.counters() + ")");
                        return false;
                    }
                    if (firstErrorAt == 0) {
                        firstErrorAt = System.nanoTime();
                        outstandingAtFirstError = outstanding.size() + 1;
                        log(String.format(
                                "first error completion: wr_id %d %s (vendor error %d), %.1f s after the "
                                        + "last success, %d wr_ids outstanding (%s)",
                                id,
                                CompletionStatus.text(st),
                                wcs.vendorError(i),
                                (firstErrorAt - lastSuccess) / 1e9,
                                outstandingAtFirstError,
                                link.counters()));
                        FaultLink.marker(markers, "first-error", FaultLink.elapsed());
                    }
                    errors.add(new long[] {id, st});
                }
            }
            if (markedAt == 0 && successes >= killAfter) {
                markedAt = System.nanoTime();
                FaultLink.marker(markers, "streaming", Long.toString(successes));
                log(successes + " successful completions: marker 'streaming' written (the host kills the server)");
            }
            if (firstErrorAt != 0 && outstanding.isEmpty()) {
                break;
            }
            now = System.nanoTime();
            if (now - nextProgress > 0) { // a stall shows in the console (a normal stream marks in ~2 s)
                nextProgress = now + progressEvery;
                log(String.format(
                        "progress: %d successes, %d errors, %d outstanding, %d posted; %s; QP %s; " + "%s",
                        successes,
                        errors.size(),
                        outstanding.size(),
                        next - 1,
                        markedAt == 0
                                ? "before the marker"
                                : String.format("%.1f s since the last success", (now - lastSuccess) / 1e9),
                        link.qp.query().state(),
                        link.counters()));
            }
            if (markedAt != 0 && lastSuccess != 0 && now - lastSuccess > bound.toNanos()) {
                break; // the retry bound passed: whatever is still outstanding is lost
            }
            if (now - streamDeadline > 0) {
                break;
            }
            if (n == 0) {
                Thread.yield();
            }
        }
        long doneAt = System.nanoTime();
        // Anything more (a duplicate) within a quiet period?
        long quietEnd = System.nanoTime() + Duration.ofSeconds(3).toNanos();
        while (System.nanoTime() - quietEnd < 0) {
            int n = link.sendCq.poll(wcs);
            for (int i = 0; i < n; i++) {
                anomalies.add("wr_id " + wcs.wrId(i) + " completed again during the quiet period (" + wcs.statusText(i)
                        + ")");
            }
            if (n == 0) {
                Thread.yield();
            }
        }
        seen.forEach((id, k) -> {
            if (k > 1) {
                anomalies.add("wr_id " + id + " completed " + k + " times");
            }
        });

        check(
                markedAt != 0,
                "streamed " + killAfter + " successful WRITE/SEND completions before the kill (in all " + successes
                        + " successes, " + (next - 1) + " posted)");
        check(true, "no error completion before the kill (the marker)");
        check(firstErrorAt != 0, "an error completion arrived after the kill");
        if (firstErrorAt == 0) {
            return false;
        }
        check(
                errors.get(0)[1] == CompletionStatus.RETRY_EXC_ERR,
                "the first error is RETRY_EXC_ERR (got " + CompletionStatus.text((int) errors.get(0)[1]) + " for wr_id "
                        + errors.get(0)[0] + ")");
        long nonFlush = errors.stream()
                .skip(1)
                .filter(e -> e[1] != CompletionStatus.WR_FLUSH_ERR)
                .count();
        check(
                nonFlush == 0,
                "every later error is WR_FLUSH_ERR (" + (errors.size() - 1) + " of them; " + nonFlush + " others)");
        check(
                outstanding.isEmpty(),
                "every outstanding wr_id completed: " + outstandingAtFirstError
                        + " outstanding at the first error, " + errors.size() + " error completions, "
                        + outstanding.size() + " never completed "
                        + (outstanding.isEmpty() ? "" : outstanding.keySet()));
        long errWrites = errors.stream().filter(e -> (e[0] & 1) == 0).count();
        check(
                errors.size() == outstandingAtFirstError,
                "exactly one error completion per outstanding wr_id ("
                        + errors.size() + " for " + outstandingAtFirstError + ": " + errWrites + " WRITEs, "
                        + (errors.size() - errWrites) + " SENDs)");
        check(anomalies.isEmpty(), "no duplicate, unknown or late completion (3 s quiet period) " + anomalies);
        double all = (doneAt - lastSuccess) / 1e9;
        check(
                doneAt - lastSuccess <= bound.toNanos(),
                String.format(
                        "all errors within the retry bound: %.1f s "
                                + "from the last success to the last error completion (bound %d s); first error after %.1f s",
                        all, bound.toSeconds(), (firstErrorAt - lastSuccess) / 1e9));

        // Our posted receives flush too, each exactly once.
        int got = link.recvCq.poll(wcs, RECEIVES, Duration.ofSeconds(10));
        boolean recvOk = got == RECEIVES;
        Map<Long, Integer> recvSeen = new HashMap<>();
        for (int i = 0; i < got; i++) {
            recvOk &= wcs.status(i) == CompletionStatus.WR_FLUSH_ERR;
            recvSeen.merge(wcs.wrId(i), 1, Integer::sum);
        }
        recvOk &= recvSeen.size() == RECEIVES && link.recvCq.poll(wcs) == 0;
        check(
                recvOk,
                "the " + RECEIVES + " posted receives flushed exactly once with WR_FLUSH_ERR (got " + got + ": "
                        + recvSeen + ")");
        QueuePairState st = link.qp.query().state();
        check(st == QueuePairState.ERR, "the queue pair is in ERR (" + st + ")");
        return true;
    }

    private void verifiedExchange(FaultLink link) {
        int len = 64 * 1024;
        MemorySegment src = link.data.segment().asSlice(0, len);
        pattern(src, 7);
        CRC32 crc = new CRC32();
        crc.update(src.asByteBuffer());
        long want = crc.getValue();
        link.postWrite(1, 0, len);
        link.postMessage(2, 0, FaultLink.VERIFY, len, want, 0);
        WorkCompletions wcs = link.wcs;
        int n = link.sendCq.poll(wcs, 2, bound);
        boolean sent = n == 2 && wcs.isSuccess(0) && wcs.isSuccess(1);
        check(
                sent,
                "after the reconnect: RDMA WRITE of " + len + " bytes and the VERIFY SEND succeeded (" + n
                        + " completions" + (n > 0 ? ", " + wcs.statusText(0) : "")
                        + (n > 1 ? ", " + wcs.statusText(1) : "")
                        + ")");
        int r = link.recvCq.poll(wcs, 1, bound);
        if (r != 1 || !wcs.isSuccess(0)) {
            check(false, "the server's REPLY arrived (" + (r == 1 ? wcs.statusText(0) : "none within " + bound) + ")");
            return;
        }
        MemorySegment m = link.received((int) wcs.wrId(0));
        int type = m.get(JAVA_INT, 0);
        long got = m.get(JAVA_LONG, 8);
        check(
                type == FaultLink.REPLY && got == want,
                "verified exchange: the server's CRC of the written data " + Long.toHexString(got) + " equals ours "
                        + Long.toHexString(want) + " (reply type " + type + ")");
    }

    private void closeAll(String what, AutoCloseable... cs) {
        List<String> problems = new ArrayList<>();
        for (AutoCloseable c : cs) {
            if (c == null) {
                continue;
            }
            try {
                c.close();
            } catch (Exception e) {
                problems.add(e.toString());
            }
        }
        check(problems.isEmpty(), what + ": every object closed without an exception " + problems);
    }

    private static void pattern(MemorySegment s, int seed) {
        for (long i = 0; i < s.byteSize(); i += 8) {
            s.set(JAVA_LONG, i, seed * 0x9E3779B97F4A7C15L + i * 31);
        }
    }

    private void check(boolean ok, String what) {
        (ok ? passed : failed).add(what);
        log((ok ? "PASS " : "FAIL ") + what);
    }

    private static void log(String s) {
        System.out.println("[fault-client " + FaultLink.elapsed() + "] " + s);
    }
}
