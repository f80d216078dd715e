package org.verbs4j.fault;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.ConnectionData;
import org.verbs4j.Context;
import org.verbs4j.GidEntry;
import org.verbs4j.MemoryRegion;
import org.verbs4j.OutOfBandChannel;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.Verbs;
import org.verbs4j.WorkCompletions;

/**
 * One end of the fault test's RC connection (public API only): a data region the peer may
 * RDMA-WRITE into, a message region of 64-byte slots (sends from slots 0..63, receive i into slot
 * 64 + i), separate send and receive CQs (the receive CQ holds every receive), one RC queue pair
 * connected through an {@link OutOfBandChannel} with the default {@link ConnectOptions} (retry
 * count 6: bounded) but a longer ACK timeout ({@link #ACK_TIMEOUT}). Closes everything it
 * created, in reverse order.
 */
final class FaultLink implements AutoCloseable {
    static final int DATA_BYTES = 1 << 20;
    static final int SLOT = 64;
    static final int SEND_SLOTS = 64;
    /**
     * The server's receives: more than the client sends in a whole run, so that a stalled server
     * (one emulated CPU: JIT, GC, the host's scheduler) never leaves the client without a receive
     * to hit (the default RNR budget, 7 × max(0.64 ms, one jiffy), is short under TCG).
     */
    static final int SERVER_RECEIVES = 8192;

    static final int PORT = 18515;
    /**
     * The local ACK timeout exponent: 18 = 1.07 s, so a dead peer fails a request after
     * (retry_cnt 6 + 1) × 1.07 ≈ 7.5 s. The default (14 = 67 ms, ≈ 0.5 s in all) failed a live
     * connection here with RETRY_EXC_ERR when three TCG guests shared the two host cores.
     */
    static final int ACK_TIMEOUT = 18;

    /** Message types: an int at offset 0 of a slot, then three longs. */
    static final int DATA = 1, VERIFY = 2, REPLY = 3;

    final Arena arena = Arena.ofShared();
    final Context ctx;
    final ProtectionDomain pd;
    final MemoryRegion data;
    final MemoryRegion msg;
    final CompletionQueue sendCq;
    final CompletionQueue recvCq;
    final QueuePair qp;
    final SendWorkRequests swr = new SendWorkRequests(1, 1);
    final ReceiveWorkRequests rwr = new ReceiveWorkRequests(1, 1);
    final WorkCompletions wcs = new WorkCompletions(64);
    ConnectionData peer;

    final int receives;

    private FaultLink(int receives) {
        this.receives = receives;
        List<AutoCloseable> made = new ArrayList<>();
        try {
            String dev = System.getenv().getOrDefault("VERBS4J_DEVICE", "rxe0");
            ctx = add(made, Verbs.open(dev));
            pd = add(made, ctx.allocateProtectionDomain());
            data = add(
                    made,
                    pd.register(arena, arena.allocate(DATA_BYTES, 4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE));
            msg = add(
                    made,
                    pd.register(
                            arena, arena.allocate((long) SLOT * (SEND_SLOTS + receives), 4096), Access.LOCAL_WRITE));
            sendCq = add(made, ctx.createCompletionQueue(256));
            recvCq = add(made, ctx.createCompletionQueue(receives + 16));
            qp = add(
                    made,
                    pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, sendCq, recvCq)
                            .maxSendWr(128)
                            .maxRecvWr(Math.max(16, receives))));
        } catch (RuntimeException e) {
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    made.get(i).close();
                } catch (Exception s) {
                    e.addSuppressed(s);
                }
            }
            closeQuietly(swr, rwr, wcs, arena);
            throw e;
        }
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T t) {
        made.add(t);
        return t;
    }

    /**
     * Opens the objects, posts {@code receives} receives, exchanges connection data over
     * {@code ch}, connects RESET→RTS and meets the peer at a barrier (both sides are then RTS).
     */
    static FaultLink connect(OutOfBandChannel ch, int receives) {
        FaultLink l = new FaultLink(receives);
        try {
            GidEntry gid = l.ctx.firstRoceV2Ipv4Gid(1)
                    .orElseThrow(
                            () -> new IllegalStateException("no RoCE v2 IPv4 GID on port 1 of " + l.ctx.deviceName()));
            ConnectOptions o = ConnectOptions.roce(gid.index()).withTimeout(ACK_TIMEOUT); // retry_cnt: the default 6
            l.qp.toInit(1, Set.of(Access.REMOTE_WRITE));
            for (int i = 0; i < receives; i++) {
                l.postRecv(i);
            }
            QueuePairEndpoint local =
                    l.qp.localEndpoint(gid.index(), ThreadLocalRandom.current().nextInt(1 << 24));
            l.peer = ch.exchange(ConnectionData.of(local, l.data));
            l.qp.toRtr(l.peer.endpoint(), o);
            l.qp.toRts(local.psn(), o);
            ch.barrier("rts");
            return l;
        } catch (RuntimeException e) {
            try {
                l.close();
            } catch (RuntimeException s) {
                e.addSuppressed(s);
            }
            throw e;
        }
    }

    /** A receive into slot {@code SEND_SLOTS + i}, wr_id {@code i}. */
    void postRecv(int i) {
        rwr.clear().add(i).sge(msg, (long) (SEND_SLOTS + i) * SLOT, SLOT);
        qp.postRecv(rwr);
    }

    /** Writes a message into send slot {@code slot} and posts a signaled SEND of it. */
    void postMessage(long wrId, int slot, int type, long a, long b, long c) {
        MemorySegment s = msg.segment().asSlice((long) slot * SLOT, SLOT);
        s.set(JAVA_INT, 0, type);
        s.set(JAVA_LONG, 8, a);
        s.set(JAVA_LONG, 16, b);
        s.set(JAVA_LONG, 24, c);
        swr.clear().send(wrId).sge(msg, (long) slot * SLOT, SLOT).signaled();
        qp.postSend(swr);
    }

    /** Posts a signaled RDMA WRITE of {@code len} bytes at {@code offset} of ours to the same offset of the peer's. */
    void postWrite(long wrId, long offset, int len) {
        swr.clear()
                .write(wrId, peer.bufferAddress() + offset, peer.rkey())
                .sge(data, offset, len)
                .signaled();
        qp.postSend(swr);
    }

    /** The received message of receive wr_id {@code i}. */
    MemorySegment received(int i) {
        return msg.segment().asSlice((long) (SEND_SLOTS + i) * SLOT, SLOT);
    }

    @Override
    public void close() {
        RuntimeException first = null;
        for (AutoCloseable c : new AutoCloseable[] {qp, recvCq, sendCq, msg, data, pd, ctx, swr, rwr, wcs, arena}) {
            try {
                if (c != null) {
                    c.close();
                }
            } catch (Exception e) {
                if (first == null) {
                    first = e instanceof RuntimeException r ? r : new IllegalStateException(e);
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    private static void closeQuietly(AutoCloseable... cs) {
        for (AutoCloseable c : cs) {
            try {
                c.close();
            } catch (Exception ignored) {
                // best effort on a failed open
            }
        }
    }

    // ---- helpers shared by the two programs --------------------------------------------------

    private static final long T0 = System.nanoTime();

    static String elapsed() {
        return String.format("%7.2fs", (System.nanoTime() - T0) / 1e9);
    }

    /**
     * Starts a daemon thread that, if this JVM still runs {@code after} from now, prints once what
     * every thread is doing: each Java thread's state and stack (the main thread's in full), each
     * kernel task's state, wait channel and, where readable, kernel stack, and the kernel's last
     * messages. A hang then leaves its cause in the console, before the host's deadline ends the
     * guest without a word. Prints nothing in a run that ends in time; {@code after} of zero or
     * less starts nothing.
     */
    static void watchdog(String who, Duration after) {
        if (after.isZero() || after.isNegative()) {
            return;
        }
        Thread.ofPlatform().daemon().name("fault-watchdog").start(() -> {
            try {
                Thread.sleep(after);
            } catch (InterruptedException e) {
                return;
            }
            StringBuilder sb = new StringBuilder();
            sb.append('[')
                    .append(who)
                    .append(' ')
                    .append(elapsed())
                    .append("] WATCHDOG: still running after ")
                    .append(after.toSeconds())
                    .append(" s; what every thread is doing:\n");
            Thread.getAllStackTraces().forEach((t, frames) -> {
                sb.append("  java thread '")
                        .append(t.getName())
                        .append("' ")
                        .append(t.getState())
                        .append('\n');
                int max = t.getName().equals("main") ? 40 : 3;
                for (int i = 0; i < frames.length && i < max; i++) {
                    sb.append("      at ").append(frames[i]).append('\n');
                }
            });
            Path tasks = Path.of("/proc/self/task");
            try (var ds = Files.newDirectoryStream(tasks)) {
                for (Path task : ds) {
                    String comm = read(task.resolve("comm"));
                    String stat = read(task.resolve("stat"));
                    int close = stat.lastIndexOf(')');
                    String state = close > 0 && close + 2 < stat.length() ? stat.substring(close + 2, close + 3) : "?";
                    sb.append("  task ")
                            .append(task.getFileName())
                            .append(" '")
                            .append(comm)
                            .append("' state ")
                            .append(state)
                            .append(" wchan ")
                            .append(read(task.resolve("wchan")))
                            .append('\n');
                    if (!state.equals("S")) { // running or in an uninterruptible wait: where in the kernel
                        for (String line : read(task.resolve("stack")).split("\n")) {
                            if (!line.isBlank()) {
                                sb.append("      ").append(line).append('\n');
                            }
                        }
                    }
                }
            } catch (IOException | RuntimeException e) {
                sb.append("  (").append(tasks).append(": ").append(e).append(")\n");
            }
            sb.append("  the kernel's last messages (dmesg):\n");
            try {
                Process p =
                        new ProcessBuilder("dmesg").redirectErrorStream(true).start();
                p.getOutputStream().close();
                String[] lines = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).split("\n");
                p.waitFor(5, TimeUnit.SECONDS);
                for (int i = Math.max(0, lines.length - 25); i < lines.length; i++) {
                    sb.append("      ").append(lines[i]).append('\n');
                }
            } catch (IOException | InterruptedException | RuntimeException e) {
                sb.append("      (dmesg: ").append(e).append(")\n");
            }
            System.out.print(sb);
            System.out.flush();
        });
    }

    /**
     * This link's packet counters, as {@code rxe counters: name=value ...; eth0: name=value ...}:
     * the Soft-RoCE port's non-zero hardware counters (packets sent and received, retries, RNR
     * NAKs...) and the guest NIC's non-zero packet and drop counters, so that a stalled stream
     * shows where packets stopped: in rxe, on the way out of the guest, or at the peer.
     */
    String counters() {
        Path hw = Path.of("/sys/class/infiniband", ctx.deviceName(), "ports", "1", "hw_counters");
        List<String> names;
        try (var files = Files.list(hw)) {
            names = files.map(f -> f.getFileName().toString()).sorted().toList();
        } catch (IOException | RuntimeException e) {
            names = List.of();
        }
        return "rxe counters: " + nonZero(hw, names) + "; eth0: "
                + nonZero(
                        Path.of("/sys/class/net/eth0/statistics"),
                        List.of(
                                "tx_packets",
                                "rx_packets",
                                "tx_dropped",
                                "rx_dropped",
                                "tx_errors",
                                "rx_errors",
                                "rx_missed_errors",
                                "rx_over_errors",
                                "rx_fifo_errors"));
    }

    private static String nonZero(Path dir, List<String> names) {
        StringBuilder sb = new StringBuilder();
        for (String n : names) {
            String v = read(dir.resolve(n));
            if (!v.equals("0")) {
                sb.append(sb.isEmpty() ? "" : " ").append(n).append('=').append(v);
            }
        }
        return sb.toString();
    }

    private static String read(Path p) {
        try {
            return Files.readString(p, StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return "(" + e.getClass().getSimpleName() + ")";
        }
    }

    /** Writes {@code name} (with {@code text}) into the marker folder the host script watches. */
    static void marker(Path dir, String name, String text) {
        try {
            Files.createDirectories(dir);
            Path tmp = dir.resolve(name + ".tmp");
            Files.writeString(tmp, text + "\n", StandardCharsets.UTF_8);
            Files.move(tmp, dir.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write marker " + name + " in " + dir, e);
        }
    }

    /**
     * The per-device counts of {@code rdma res show}, e.g. {@code {pd=1, cq=2, qp=1, mr=2, ctx=1, ...}}
     * from {@code 0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 2 ctx 1 srq 0}. Bounded (20 s).
     */
    static Map<String, Integer> resourceCounts(String device) {
        String out;
        try {
            Process p = new ProcessBuilder("rdma", "res", "show")
                    .redirectErrorStream(true)
                    .start();
            p.getOutputStream().close();
            if (!p.waitFor(20, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("rdma res show did not finish within 20 s");
            }
            out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("rdma res show could not run", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        for (String line : out.split("\n")) {
            String[] t = line.trim().split("\\s+");
            if (t.length >= 3 && t[1].equals(device + ":")) {
                Map<String, Integer> counts = new HashMap<>();
                for (int i = 2; i + 1 < t.length; i += 2) {
                    counts.put(t[i], Integer.parseInt(t[i + 1]));
                }
                return counts;
            }
        }
        throw new IllegalStateException("no line for " + device + " in `rdma res show`:\n" + out);
    }
}
