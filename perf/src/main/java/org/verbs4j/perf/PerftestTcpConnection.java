package org.verbs4j.perf;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * perftest's out-of-band TCP exchange (its "ethernet" exchange), written from reading perftest
 * 4.5's source, not copied. The client connects to the server's port (default 18515). Every
 * exchange is symmetric: the client writes its message and then reads the server's; the server
 * reads first and then writes. Each message goes out in one {@code write} (perftest reads each
 * with one {@code read} of the exact size). In order:
 * <ol>
 * <li>versions: 16 bytes, a NUL-padded string ("6.06" for Debian's perftest 4.5-0.17); perftest
 * refuses a peer below 5.70;</li>
 * <li>system data (peer version 5.32 and up): the cycle buffer (page size) and the cache line size,
 * 4 bytes each, big-endian; each side then uses the larger of both;</li>
 * <li>MTU (peer version 5.1 and up): the active MTU's {@code enum ibv_mtu} value as a decimal
 * string in 2 bytes (4 before 5.31); each side uses the smaller;</li>
 * <li>connection records ({@link KeyMessage}), then barriers, which are further record exchanges;</li>
 * <li>at the end of a bandwidth test: the report, field by field (size and iterations 8 bytes
 * each, peak, average and message rate as big-endian doubles), then a last barrier and a
 * 5-byte "done".</li>
 * </ol>
 * One thread; every read is bounded by the timeout.
 */
public final class PerftestTcpConnection extends PerftestProtocol {

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final boolean client;
    private final String description;
    private final int keySize;

    private PerftestTcpConnection(Socket socket, boolean client, String description, boolean withGid)
            throws IOException {
        this.socket = socket;
        this.client = client;
        this.description = description;
        this.keySize = withGid ? KeyMessage.SIZE_GID : KeyMessage.SIZE_LID;
        socket.setTcpNoDelay(true);
        this.in = socket.getInputStream();
        this.out = socket.getOutputStream();
    }

    /** Server: accepts one client on {@code listener} (then closes it), within the timeout. */
    public static PerftestTcpConnection accept(ServerSocket listener, Duration timeout, boolean withGid) {
        try (listener) {
            listener.setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeout.toMillis()));
            Socket s = listener.accept();
            s.setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeout.toMillis()));
            return new PerftestTcpConnection(s, false, "TCP from " + s.getRemoteSocketAddress(), withGid);
        } catch (SocketTimeoutException e) {
            throw new IllegalStateException(
                    "no client connected to TCP port " + listener.getLocalPort() + " within " + timeout.toSeconds()
                            + " s",
                    e);
        } catch (IOException e) {
            throw new UncheckedIOException(
                    "accepting a client on TCP port " + listener.getLocalPort() + ": " + e.getMessage(), e);
        }
    }

    /** Client: connects to {@code server}, retrying (the server may still be starting) within the timeout. */
    public static PerftestTcpConnection connect(InetSocketAddress server, Duration timeout, boolean withGid) {
        long deadline = System.nanoTime() + timeout.toNanos();
        IOException last = null;
        while (System.nanoTime() - deadline < 0) {
            Socket s = new Socket();
            try {
                s.connect(server, (int) Math.max(1, Math.min(5000, timeout.toMillis())));
                s.setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeout.toMillis()));
                return new PerftestTcpConnection(s, true, "TCP to " + server, withGid);
            } catch (IOException e) {
                last = e;
                try {
                    s.close();
                } catch (IOException ignored) {
                    // a socket that did not connect
                }
                try {
                    Thread.sleep(200);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        throw new IllegalStateException(
                "cannot connect to " + server + " within " + timeout.toSeconds() + " s: "
                        + (last == null ? "interrupted" : last.getMessage()),
                last);
    }

    @Override
    public String describe() {
        return description;
    }

    /** Client writes then reads; the server reads then writes. */
    @Override
    protected byte[] exchange(byte[] mine, int theirSize, String what) {
        try {
            if (client) {
                out.write(mine);
                out.flush();
                return read(theirSize, what);
            }
            byte[] theirs = read(theirSize, what);
            out.write(mine);
            out.flush();
            return theirs;
        } catch (SocketTimeoutException e) {
            throw new IllegalStateException(
                    "the peer sent no " + what + " within the timeout"
                            + " (is it the same test with the same options?)",
                    e);
        } catch (IOException e) {
            throw new UncheckedIOException(
                    "exchanging " + what + " with the peer: " + e.getMessage()
                            + " (is it the same test with the same options?)",
                    e);
        }
    }

    private byte[] read(int n, String what) throws IOException {
        byte[] b = new byte[n];
        try {
            new DataInputStream(in).readFully(b);
        } catch (java.io.EOFException e) {
            throw new IOException("the peer closed the connection instead of sending " + what, e);
        }
        return b;
    }

    @Override
    public KeyMessage exchangeKeys(KeyMessage mine) {
        byte[] raw = mine.encode();
        if (raw.length != keySize) {
            throw new IllegalStateException(
                    "record of " + raw.length + " bytes on a connection of " + keySize + "-byte records");
        }
        return KeyMessage.decode(exchange(raw, keySize, "connection record"));
    }

    @Override
    public void finish(KeyMessage mine) {
        sync(mine);
        try {
            out.write("done\0".getBytes(StandardCharsets.US_ASCII));
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException("writing the final 'done' to the peer: " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing
        }
    }
}
