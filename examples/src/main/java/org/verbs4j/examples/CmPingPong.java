package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.cm.CmEventChannel;
import org.verbs4j.cm.CmListener;
import org.verbs4j.cm.ConnectionRequest;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.RdmaConnection;

/**
 * SEND/RECV ping-pong between two processes connected by IP address and port through the
 * connection manager ({@code org.verbs4j.cm}, librdmacm): no GIDs, QP numbers or PSNs to trade by
 * hand, no TCP side channel (compare {@link PingPong}). The client puts the number of rounds in
 * its connect request's private data; the server reads it from the request, accepts, and answers
 * each number with the number plus one. Every reply is checked. The client then disconnects and
 * the server sees it.
 *
 * <p>The receive for the first message is posted in {@link ConnectionSetup#beforeConnect}: the
 * queue pair exists there, and the peer cannot send before the connection is established.
 *
 * <pre>
 *   server: java ... CmPingPong server [ADDRESS] [PORT]         (ADDRESS: the device's IPv4 address by default)
 *   client: java ... CmPingPong client [ADDRESS] [PORT] [ROUNDS]
 * </pre>
 */
public final class CmPingPong {
    /** The default port (rping's). */
    public static final int DEFAULT_PORT = 7471;

    private static final Duration TIMEOUT = Duration.ofSeconds(30);
    private static final long RECV_ID = 1, SEND_ID = 2;

    private CmPingPong() {}

    /** Runs the server or the client; {@code examples/run cm-ping-pong} runs both. */
    public static void main(String[] args) {
        if (args.length >= 1 && args[0].equals("server")) {
            server(System.out, address(args), args.length > 2 ? Integer.parseInt(args[2]) : DEFAULT_PORT);
        } else if (args.length >= 1 && args[0].equals("client")) {
            client(
                    System.out,
                    address(args),
                    args.length > 2 ? Integer.parseInt(args[2]) : DEFAULT_PORT,
                    args.length > 3 ? Integer.parseInt(args[3]) : 1000);
        } else {
            System.err.println(
                    "usage: CmPingPong server [ADDRESS] [PORT] | CmPingPong client [ADDRESS] [PORT] [ROUNDS]");
            System.exit(2);
        }
    }

    private static String address(String[] args) {
        return args.length > 1 && !args[1].isEmpty() ? args[1] : localAddress();
    }

    /**
     * The IPv4 address of the device's RoCE v2 GID ({@link Setup#gid}): the address rdma_cm
     * resolves to this device. (127.0.0.1 does not: it belongs to no RDMA device.)
     */
    public static String localAddress() {
        try (Context ctx = Setup.openDevice()) {
            return Setup.gid(ctx).gid().toInetAddress().getHostAddress();
        }
    }

    /** Accepts one connection on {@code address:port} and answers its pings until it disconnects. */
    public static void server(PrintStream out, String address, int port) {
        AtomicReference<MemoryRegion> region = new AtomicReference<>();
        try (CmEventChannel channel = CmEventChannel.open();
                CmListener listener = CmListener.bind(channel, new InetSocketAddress(address, port), 4);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
                SendWorkRequests sends = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            out.println("server: listening on " + address + " port " + port + " (rdma_cm)");
            out.flush();
            ConnectionRequest request = listener.accept(Duration.ofSeconds(60));
            long rounds = ByteBuffer.wrap(request.privateData()).getLong(); // the client's request says how many
            ConnectionSetup setup = new ConnectionSetup() // SEND/RECV only: no remote access
                    .beforeConnect(c -> {
                        // bytes 0-7: what we send; 8-15: where the client's message lands
                        MemoryRegion mr = c.protectionDomain().allocateMemoryRegion(16, Access.LOCAL_WRITE);
                        region.set(mr);
                        c.queuePair().postRecv(recvs.clear().add(RECV_ID).sge(mr, 8, 8)); // before the client can send
                    });
            try (RdmaConnection c = request.accept(setup, null, TIMEOUT)) {
                MemoryRegion mr = region.get();
                out.println("server: accepted " + c.peerAddress().getAddress().getHostAddress() + " on "
                        + c.context().deviceName() + ", " + c.queuePair() + "; the client asked for " + rounds
                        + " rounds");
                for (long i = 0; i < rounds; i++) {
                    await(c.receiveCompletionQueue(), wcs, "ping " + i);
                    long ping = mr.segment().get(JAVA_LONG, 8);
                    c.queuePair().postRecv(recvs.clear().add(RECV_ID).sge(mr, 8, 8)); // the next ping's receive
                    mr.segment().set(JAVA_LONG, 0, ping + 1);
                    c.queuePair()
                            .postSend(sends.clear().send(SEND_ID).sge(mr, 0, 8).signaled());
                    await(c.sendCompletionQueue(), wcs, "reply " + i);
                }
                boolean seen = c.awaitDisconnect(TIMEOUT);
                out.println("server: answered " + rounds + " pings, each with the number plus one; "
                        + (seen ? "the client disconnected (" + c.state() + ")" : "no disconnect within " + TIMEOUT));
            } finally {
                if (region.get() != null) {
                    region.get().close();
                }
            }
        }
    }

    /** Connects to {@code address:port} and plays {@code rounds} rounds. */
    public static void client(PrintStream out, String address, int port, int rounds) {
        AtomicReference<MemoryRegion> region = new AtomicReference<>();
        ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
        ConnectionSetup setup = new ConnectionSetup().beforeConnect(c -> {
            MemoryRegion mr = c.protectionDomain().allocateMemoryRegion(16, Access.LOCAL_WRITE);
            region.set(mr);
            c.queuePair().postRecv(recvs.clear().add(RECV_ID).sge(mr, 8, 8)); // the first reply's receive
        });
        byte[] request = ByteBuffer.allocate(8).putLong(rounds).array(); // private data of the request
        try (recvs;
                CmEventChannel channel = CmEventChannel.open();
                SendWorkRequests sends = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            long t0 = System.nanoTime();
            try (RdmaConnection c = RdmaConnection.connect(channel, address, port, setup, request, TIMEOUT)) {
                out.printf(
                        "client: connected to %s port %d in %d ms (address and route resolved, %s)%n",
                        address, port, (System.nanoTime() - t0) / 1_000_000, c.queuePair());
                MemoryRegion mr = region.get();
                long value = 1;
                long start = System.nanoTime();
                for (int i = 0; i < rounds; i++) {
                    mr.segment().set(JAVA_LONG, 0, value);
                    c.queuePair()
                            .postSend(sends.clear().send(SEND_ID).sge(mr, 0, 8).signaled());
                    await(c.sendCompletionQueue(), wcs, "ping " + i);
                    await(c.receiveCompletionQueue(), wcs, "reply " + i);
                    long reply = mr.segment().get(JAVA_LONG, 8);
                    if (reply != value + 1) {
                        throw new IllegalStateException("round " + i + ": sent " + value + ", got " + reply);
                    }
                    value = reply + 1;
                    c.queuePair().postRecv(recvs.clear().add(RECV_ID).sge(mr, 8, 8));
                }
                long micros = (System.nanoTime() - start) / 1000;
                out.println("client: " + rounds + " round trips, every reply was the number sent plus one (last reply "
                        + (value - 1) + "); " + (rounds == 0 ? 0 : micros / rounds) + " us per round trip on average");
                c.disconnect();
                out.println("client: disconnected (" + c.state() + ")");
            } finally {
                if (region.get() != null) {
                    region.get().close();
                }
            }
        }
    }

    /** Polls one successful completion from {@code cq} within {@link Setup#WAIT}. */
    private static void await(CompletionQueue cq, WorkCompletions wcs, String what) {
        if (cq.poll(wcs, 1, Setup.WAIT) != 1) {
            throw new IllegalStateException("no completion for the " + what + " within " + Setup.WAIT);
        }
        if (!wcs.isSuccess(0)) {
            throw new IllegalStateException("the " + what + " failed: " + wcs.statusText(0));
        }
    }
}
