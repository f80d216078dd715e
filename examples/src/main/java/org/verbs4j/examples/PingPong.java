package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.Arrays;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionOpcode;
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
import org.verbs4j.WorkCompletions;

/**
 * Two-sided SEND/RECV between two processes: a server and a client exchange their queue pair
 * endpoints over a TCP {@link OutOfBandChannel}, connect, and play ping-pong: the client SENDs a
 * number, the server RECVs it and SENDs back the number plus one, {@code rounds} times. Every reply
 * is checked. The client also prints its round-trip time for the first and the last rounds: the
 * first thousands run before the JIT has compiled the loop.
 *
 * <pre>
 *   server: java ... PingPong server [PORT]
 *   client: java ... PingPong client HOST [PORT] [ROUNDS]
 * </pre>
 */
public final class PingPong {
    /** The default TCP port of the out-of-band channel. */
    public static final int DEFAULT_PORT = 18600;

    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final long RECV_ID = 1, SEND_ID = 2;

    private PingPong() {}

    /** Runs the server or the client; {@code examples/run ping-pong} runs both. */
    public static void main(String[] args) throws IOException {
        if (args.length >= 1 && args[0].equals("server")) {
            server(System.out, args.length > 1 ? Integer.parseInt(args[1]) : DEFAULT_PORT);
        } else if (args.length >= 2 && args[0].equals("client")) {
            client(
                    System.out,
                    args[1],
                    args.length > 2 ? Integer.parseInt(args[2]) : DEFAULT_PORT,
                    args.length > 3 ? Integer.parseInt(args[3]) : 1000);
        } else {
            System.err.println("usage: PingPong server [PORT] | PingPong client HOST [PORT] [ROUNDS]");
            System.exit(2);
        }
    }

    /** One side's verbs objects; closed in reverse order of creation. */
    private record Side(
            Context ctx,
            ProtectionDomain pd,
            CompletionQueue cq,
            MemoryRegion mr,
            QueuePair qp,
            SendWorkRequests sends,
            ReceiveWorkRequests recvs,
            WorkCompletions wcs)
            implements AutoCloseable {
        static Side open() {
            Context ctx = Setup.openDevice();
            ProtectionDomain pd = ctx.allocateProtectionDomain();
            // one CQ for both directions: room for every send and receive the QP can hold
            CompletionQueue cq = ctx.createCompletionQueue(32);
            // bytes 0-7: what we send; 8-15: where the peer's message lands (the device writes it)
            MemoryRegion mr = pd.allocateMemoryRegion(16, Access.LOCAL_WRITE);
            QueuePair qp = pd.createQueuePair(
                    QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(16).maxRecvWr(4));
            return new Side(
                    ctx,
                    pd,
                    cq,
                    mr,
                    qp,
                    new SendWorkRequests(1, 1),
                    new ReceiveWorkRequests(1, 1),
                    new WorkCompletions(4));
        }

        /** Posts one receive for the peer's next message: it must be there BEFORE the peer sends. */
        void postReceive() {
            qp.postRecv(recvs.clear().add(RECV_ID).sge(mr, 8, 8));
        }

        void send(long value) {
            mr.segment().set(JAVA_LONG, 0, value);
            qp.postSend(sends.clear().send(SEND_ID).sge(mr, 0, 8).signaled());
        }

        /** Waits until both our send and the peer's message completed; returns the message. */
        long awaitSendAndReceive() {
            boolean sent = false, received = false;
            while (!sent || !received) {
                int n = cq.poll(wcs, 1, Setup.WAIT);
                if (n == 0) {
                    throw new IllegalStateException(
                            "no completion within " + Setup.WAIT + " (sent " + sent + ", received " + received + ")");
                }
                for (int i = 0; i < n; i++) {
                    if (!wcs.isSuccess(i)) {
                        throw new IllegalStateException(
                                "work request " + wcs.wrId(i) + " failed: " + wcs.statusText(i));
                    }
                    if (wcs.opcode(i) == CompletionOpcode.RECV) {
                        received = true;
                    } else {
                        sent = true;
                    }
                }
            }
            return mr.segment().get(JAVA_LONG, 8);
        }

        /**
         * RESET -> INIT, posts the first receive (a queue pair takes receives from INIT on), exchanges
         * endpoints over {@code oob}, then INIT -> RTR -> RTS. No remote access granted: SEND/RECV only.
         */
        void connect(OutOfBandChannel oob, PrintStream out, String who) {
            GidEntry gid = Setup.gid(ctx);
            ConnectOptions options = ConnectOptions.roce(gid.index());
            qp.toInit(1, Set.of());
            postReceive(); // before the peer can send
            QueuePairEndpoint local = qp.localEndpoint(gid.index(), (int) (System.nanoTime() & 0xffffff));
            ConnectionData peer = oob.exchange(ConnectionData.of(local));
            qp.toRtr(peer.endpoint(), options);
            qp.toRts(local.psn(), options);
            out.println(who + ": " + qp + " connected to remote QP "
                    + peer.endpoint().qpNumber() + " through GID index " + gid.index() + " ("
                    + gid.gid().toInetAddress().getHostAddress() + ")");
        }

        @Override
        public void close() {
            for (AutoCloseable c : new AutoCloseable[] {wcs, recvs, sends, qp, mr, cq, pd, ctx}) {
                try {
                    c.close();
                } catch (Exception e) {
                    throw new IllegalStateException("closing " + c, e);
                }
            }
        }
    }

    /** Accepts one client on {@code port} and answers its pings until it says "done". */
    public static void server(PrintStream out, int port) {
        try (ServerSocket listener = new ServerSocket()) {
            listener.setReuseAddress(true);
            listener.bind(new InetSocketAddress(port));
            out.println("server: listening on TCP port " + port);
            out.flush();
            try (Side side = Side.open();
                    OutOfBandChannel oob = OutOfBandChannel.accept(listener, TIMEOUT)) {
                side.connect(oob, out, "server"); // posts the first receive
                oob.barrier("receive posted"); // the client sends only after this
                long rounds = oob.receiveLong();
                int sendsInFlight = 0; // a reply's completion may come after the next ping
                for (long i = 0; i < rounds; i++) {
                    boolean received = false;
                    while (!received) {
                        int n = side.cq.poll(side.wcs, 1, Setup.WAIT);
                        if (n == 0) {
                            throw new IllegalStateException("no ping within " + Setup.WAIT + " (round " + i + ")");
                        }
                        for (int k = 0; k < n; k++) {
                            if (!side.wcs.isSuccess(k)) {
                                throw new IllegalStateException(
                                        "work request " + side.wcs.wrId(k) + " failed: " + side.wcs.statusText(k));
                            }
                            if (side.wcs.opcode(k) == CompletionOpcode.RECV) {
                                received = true;
                            } else {
                                sendsInFlight--;
                            }
                        }
                    }
                    long ping = side.mr.segment().get(JAVA_LONG, 8);
                    side.postReceive(); // the next ping's receive, before we answer
                    side.send(ping + 1);
                    sendsInFlight++;
                }
                while (sendsInFlight > 0) { // the last replies' completions
                    int n = side.cq.poll(side.wcs, 1, Setup.WAIT);
                    if (n == 0) {
                        throw new IllegalStateException(sendsInFlight + " replies did not complete");
                    }
                    sendsInFlight -= n;
                }
                oob.barrier("done");
                out.println("server: answered " + rounds + " pings, each with the number plus one");
            }
        } catch (IOException e) {
            throw new UncheckedIOException("server socket on port " + port, e);
        }
    }

    /** Connects to the server at {@code host:port} and plays {@code rounds} rounds. */
    public static void client(PrintStream out, String host, int port, int rounds) {
        try (Side side = Side.open();
                OutOfBandChannel oob = OutOfBandChannel.connect(new InetSocketAddress(host, port), TIMEOUT)) {
            side.connect(oob, out, "client"); // posts the receive for the first reply
            oob.barrier("receive posted");
            oob.sendLong(rounds);
            long[] nanos = new long[rounds];
            long value = 1;
            for (int i = 0; i < rounds; i++) {
                long t0 = System.nanoTime();
                side.send(value);
                long reply = side.awaitSendAndReceive();
                nanos[i] = System.nanoTime() - t0;
                if (reply != value + 1) {
                    throw new IllegalStateException("round " + i + ": sent " + value + ", got " + reply);
                }
                value = reply + 1;
                side.postReceive();
            }
            oob.barrier("done");
            out.println("client: " + rounds + " round trips, every reply was the number sent plus one (last reply "
                    + (value - 1) + ")");
            int k = Math.max(1, Math.min(100, rounds / 4));
            out.printf(
                    "client: median round trip, first %d rounds: %.1f us; last %d rounds: %.1f us"
                            + " (the first rounds run before the JIT compiled the loop)%n",
                    k,
                    median(Arrays.copyOfRange(nanos, 0, k)) / 1e3,
                    k,
                    median(Arrays.copyOfRange(nanos, rounds - k, rounds)) / 1e3);
        }
    }

    private static double median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
