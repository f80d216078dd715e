package org.verbs4j.fault;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.zip.CRC32;
import org.verbs4j.OutOfBandChannel;
import org.verbs4j.WorkCompletions;

/**
 * The server of the two-host fault test (softroce/two-hosts-fault.sh), run in guest A. Accepts one
 * client on the out-of-band port, connects an RC queue pair ({@link FaultLink}) and serves: DATA
 * sends are counted and their receives re-posted (the client's RDMA WRITEs land in the data
 * region); a VERIFY send {@code (length, crc)} is answered with a REPLY {@code (crc of our data
 * region's first length bytes, DATA count)}, after which the server closes everything and exits 0
 * if the CRCs matched. In the first run the host kills this guest mid-stream, so it never gets
 * that far. Every wait is bounded: {@code args[0]} seconds in all (default 900); {@code args[1]}, if
 * given, starts {@link FaultLink#watchdog} with that many seconds.
 */
public final class FaultServer {
    private FaultServer() {}

    public static void main(String[] args) throws Exception {
        Duration bound = Duration.ofSeconds(args.length > 0 ? Long.parseLong(args[0]) : 900);
        long deadline = System.nanoTime() + bound.toNanos();
        FaultLink.watchdog("fault-server", Duration.ofSeconds(args.length > 1 ? Long.parseLong(args[1]) : 0));
        int rc;
        try (ServerSocket ss = new ServerSocket()) {
            ss.setReuseAddress(true);
            // The guest's own address only (VERBS4J_GUEST_IP, set by the guest's stage 2).
            String ip = System.getenv("VERBS4J_GUEST_IP");
            ss.bind(
                    ip == null || ip.isEmpty()
                            ? new InetSocketAddress(FaultLink.PORT)
                            : new InetSocketAddress(ip, FaultLink.PORT));
            log("listening on " + ss.getLocalSocketAddress() + " (bound " + bound + ")");
            try (OutOfBandChannel ch = OutOfBandChannel.accept(ss, bound);
                    FaultLink link = FaultLink.connect(ch, FaultLink.SERVER_RECEIVES)) {
                log("connected: QP " + link.qp.qpNumber() + " -> peer QP "
                        + link.peer.endpoint().qpNumber());
                rc = serve(link, deadline);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        log("exit " + rc);
        System.exit(rc);
    }

    private static int serve(FaultLink link, long deadline) {
        WorkCompletions wcs = link.wcs;
        long dataCount = 0;
        long progressEvery = Duration.ofSeconds(10).toNanos();
        long nextProgress = System.nanoTime() + progressEvery;
        while (System.nanoTime() - deadline < 0) {
            int n = link.recvCq.poll(wcs);
            if (System.nanoTime() - nextProgress > 0) { // a stall shows in the console
                nextProgress = System.nanoTime() + progressEvery;
                log("progress: " + dataCount + " DATA messages; QP "
                        + link.qp.query().state() + "; rxe counters: " + link.counters());
            }
            if (n == 0) {
                Thread.onSpinWait();
                continue;
            }
            for (int i = 0; i < n; i++) {
                int slot = (int) wcs.wrId(i);
                if (!wcs.isSuccess(i)) {
                    log("receive " + slot + " failed: " + wcs.statusText(i));
                    return 1;
                }
                MemorySegment m = link.received(slot);
                int type = m.get(JAVA_INT, 0);
                if (type == FaultLink.DATA) {
                    if (++dataCount % 1000 == 0) {
                        log(dataCount + " DATA messages");
                    }
                    link.postRecv(slot);
                } else if (type == FaultLink.VERIFY) {
                    long len = m.get(JAVA_LONG, 8);
                    long want = m.get(JAVA_LONG, 16);
                    CRC32 crc = new CRC32();
                    crc.update(link.data.segment().asSlice(0, len).asByteBuffer());
                    long got = crc.getValue();
                    log("VERIFY of " + len + " bytes: crc " + Long.toHexString(got) + ", client's "
                            + Long.toHexString(want) + (got == want ? " (match)" : " (MISMATCH)"));
                    link.postMessage(1, 0, FaultLink.REPLY, got, dataCount, 0);
                    int k = link.sendCq.poll(wcs, 1, Duration.ofSeconds(60));
                    if (k != 1 || !wcs.isSuccess(0)) {
                        log("the REPLY did not complete: " + (k == 1 ? wcs.statusText(0) : "no completion in 60 s"));
                        return 1;
                    }
                    return got == want ? 0 : 1;
                } else {
                    log("unknown message type " + type + " in receive " + slot);
                    return 1;
                }
            }
        }
        log("no VERIFY before the deadline");
        return 1;
    }

    private static void log(String s) {
        System.out.println("[fault-server " + FaultLink.elapsed() + "] " + s);
    }
}
