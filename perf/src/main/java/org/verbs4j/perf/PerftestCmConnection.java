package org.verbs4j.perf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.EnumSet;
import org.verbs4j.Access;
import org.verbs4j.CompletionOpcode;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.VerbsException;
import org.verbs4j.WorkCompletions;
import org.verbs4j.cm.CmEventChannel;
import org.verbs4j.cm.CmListener;
import org.verbs4j.cm.ConnectionRequest;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.RdmaConnection;

/**
 * perftest's rdma_cm mode ({@code -R}), written from reading perftest 4.5's source, not copied.
 * perftest then talks over an rdma_cm RC connection of its own (the "comm" connection, on the
 * port, {@code -p}, default 18515) instead of TCP: every message of the conversation (versions,
 * system data, MTU, the connection records as the binary {@code struct pingpong_dest}
 * ({@link KeyMessage#encodeBinary}), barriers, reports) is one signaled SEND of exactly the
 * message's size into the single receive the peer keeps posted (reposted after each message;
 * the first is posted before connecting). The client sends first, the server receives first.
 * The test's own queue pair comes from a second rdma_cm connection to the same port, made
 * between two barriers ({@link #connectData}); its QP is in RTS when connected, so the records'
 * QPN and PSN are informational. There is no final "done" message.
 * <p>
 * Owns the event channel, the comm connection and its message buffer, and the data connection;
 * {@link #close} releases them. One thread; every wait is bounded by the timeout.
 */
public final class PerftestCmConnection extends PerftestProtocol {
    static final int MESSAGE = 64; // >= sizeof(struct pingpong_dest) = 56, the largest message
    private static final long RECV_ID = 5; // perftest's SYNC_SPEC_ID (only its own side checks it)

    private final CmEventChannel channel;
    private final boolean client;
    private final String host;
    private final int port;
    private final Duration timeout;
    private RdmaConnection comm;
    private final java.util.List<RdmaConnection> data = new java.util.ArrayList<>();
    private Arena arena;
    private MemoryRegion mr;
    private MemorySegment sendBuf;
    private MemorySegment recvBuf;
    private SendWorkRequests swr;
    private ReceiveWorkRequests rwr;
    private WorkCompletions wcs;

    private PerftestCmConnection(boolean client, String host, int port, Duration timeout) {
        this.channel = CmEventChannel.open();
        this.client = client;
        this.host = host;
        this.port = port;
        this.timeout = timeout;
    }

    /**
     * Server: listens on {@code port} (all addresses), runs {@code listening} (perftest's client
     * does not retry its first connect: say "waiting" only now), and accepts one client's comm
     * connection within the timeout.
     */
    public static PerftestCmConnection accept(int port, Duration timeout, Runnable listening) {
        PerftestCmConnection c = new PerftestCmConnection(false, null, port, timeout);
        try {
            try (CmListener l = CmListener.bind(c.channel, new InetSocketAddress(port), 1)) {
                listening.run();
                ConnectionRequest r = l.accept(timeout);
                c.comm = r.accept(c.commSetup(), null, timeout);
            }
            return c;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    /** Client: connects the comm connection to {@code host:port}, retrying (the server may still be starting) within the timeout. */
    public static PerftestCmConnection connect(String host, int port, Duration timeout) {
        PerftestCmConnection c = new PerftestCmConnection(true, host, port, timeout);
        try {
            c.comm = c.connectRetrying(c.commSetup());
            return c;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    private RdmaConnection connectRetrying(ConnectionSetup setup) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long left = deadline - System.nanoTime();
            try {
                return RdmaConnection.connect(channel, host, port, setup, null, Duration.ofNanos(Math.max(1, left)));
            } catch (VerbsException | IllegalStateException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                try {
                    Thread.sleep(100); // perftest's client retries every 100 ms too
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    /** The comm connection: one RC QP of its own; its message buffer registered and a receive posted before connecting. */
    private ConnectionSetup commSetup() {
        return new ConnectionSetup().maxSendWr(2).maxRecvWr(2).beforeConnect(conn -> {
            if (arena == null) {
                arena = Arena.ofShared();
                MemorySegment seg = arena.allocate(2 * MESSAGE, 64);
                mr = conn.protectionDomain().register(arena, seg, EnumSet.of(Access.LOCAL_WRITE));
                sendBuf = seg.asSlice(0, MESSAGE);
                recvBuf = seg.asSlice(MESSAGE, MESSAGE);
                swr = new SendWorkRequests(1, 1);
                rwr = new ReceiveWorkRequests(1, 1);
                wcs = new WorkCompletions(4);
            }
            conn.queuePair().postRecv(rwr.clear().add(RECV_ID).sge(mr, MESSAGE, MESSAGE));
        });
    }

    /** The device context of the comm connection (librdmacm's; not closed by the caller). */
    public Context context() {
        return comm.context();
    }

    @Override
    public String describe() {
        return "rdma_cm " + (client ? "to " : "from ") + comm.peerAddress();
    }

    @Override
    protected byte[] exchange(byte[] mine, int theirSize, String what) {
        if (mine.length > MESSAGE || theirSize > MESSAGE) {
            throw new IllegalArgumentException(what + " longer than " + MESSAGE + " bytes");
        }
        if (client) {
            send(mine, what);
            return receive(theirSize, what);
        }
        byte[] theirs = receive(theirSize, what);
        send(mine, what);
        return theirs;
    }

    private void send(byte[] mine, String what) {
        MemorySegment.copy(mine, 0, sendBuf, ValueLayout.JAVA_BYTE, 0, mine.length);
        comm.queuePair()
                .postSend(swr.clear().send(RECV_ID).sge(mr, 0, mine.length).signaled());
        await(comm.sendCompletionQueue(), false, what);
    }

    private byte[] receive(int size, String what) {
        int len = await(comm.receiveCompletionQueue(), true, what);
        if (len < size) {
            throw new IllegalStateException("the peer sent " + len + " bytes of " + what + ", expected " + size
                    + " (is it the same test with the same options?)");
        }
        byte[] b = recvBuf.asSlice(0, size).toArray(ValueLayout.JAVA_BYTE);
        comm.queuePair().postRecv(rwr.clear().add(RECV_ID).sge(mr, MESSAGE, MESSAGE));
        return b;
    }

    /** Polls {@code cq} for one completion within the timeout; returns its byte length. */
    private int await(CompletionQueue cq, boolean recv, String what) {
        long deadline = System.nanoTime() + timeout.toNanos();
        int spins = 0;
        while (cq.poll(wcs) == 0) {
            if ((++spins & 0xff) == 0) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("the peer sent no " + what + " within " + timeout.toSeconds()
                            + " s over rdma_cm (is it the same test with the same options, both with -R?)");
                }
                Thread.onSpinWait();
            }
        }
        if (!wcs.isSuccess(0)) {
            throw new IllegalStateException((recv ? "receiving " : "sending ") + what + " over rdma_cm failed: "
                    + wcs.statusText(0) + " (status " + wcs.status(0) + ")");
        }
        int op = wcs.opcode(0);
        if (recv != (op == CompletionOpcode.RECV)) {
            throw new IllegalStateException("unexpected completion opcode " + op + " on the comm connection");
        }
        return wcs.byteLength(0);
    }

    @Override
    public KeyMessage exchangeKeys(KeyMessage mine) {
        return KeyMessage.decodeBinary(exchange(mine.encodeBinary(), KeyMessage.SIZE_BINARY, "connection record"));
    }

    @Override
    public void finish(KeyMessage mine) {
        sync(mine); // over rdma_cm perftest sends no "done"
    }

    /**
     * perftest's data connection: a barrier, then the client connects to the same port (retrying
     * while the server is not listening yet) and the server, listening since before the barrier,
     * accepts one; then another barrier. Returns the connection (owned by this object; closed by {@link #closeData} or
     * {@link #close}).
     */
    public RdmaConnection connectData(ConnectionSetup setup, KeyMessage placeholder) {
        return connectData(setup, 1, placeholder)[0];
    }

    /**
     * As {@link #connectData(ConnectionSetup, KeyMessage)} for {@code count} data connections
     * ({@code -q}), all between the same two barriers: perftest's client connects one rdma_cm id
     * per QP, its server listens with a backlog of the QP count and accepts as many.
     */
    public RdmaConnection[] connectData(ConnectionSetup setup, int count, KeyMessage placeholder) {
        if (client) {
            sync(placeholder);
            for (int i = 0; i < count; i++) {
                data.add(connectRetrying(setup));
            }
        } else {
            // listening BEFORE the barrier: perftest's client connects as soon as the barrier
            // passes, and its retry after a rejection crashes (perftest 4.5-0.17)
            try (CmListener l = CmListener.bind(channel, new InetSocketAddress(port), count)) {
                sync(placeholder);
                for (int i = 0; i < count; i++) {
                    data.add(l.accept(timeout).accept(setup, null, timeout));
                }
            }
        }
        sync(placeholder);
        return data.toArray(new RdmaConnection[0]);
    }

    /** Closes the data connections (and with them their queue pairs): before their completion queues and buffer go. */
    public void closeData() {
        for (RdmaConnection c : data) {
            c.close();
        }
        data.clear();
    }

    @Override
    public void close() {
        closeData();
        if (comm != null) {
            comm.close();
        }
        if (mr != null) {
            mr.close();
        }
        if (arena != null) {
            arena.close();
        }
        if (swr != null) {
            swr.close();
            rwr.close();
            wcs.close();
        }
        channel.close();
    }
}
