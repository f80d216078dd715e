package org.verbs4j;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;

/**
 * A small TCP side channel that lets two processes connect RC/UC queue pairs without rdma_cm:
 * each side sends its {@link ConnectionData} and receives the peer's, and both can meet at
 * {@link #barrier}s. Every wait is bounded: connecting retries until a deadline (a server JVM
 * can take seconds to listen), and reads time out with a clear message.
 *
 * <p>Owns its socket. One thread uses it at a time.
 */
public final class OutOfBandChannel implements AutoCloseable {
    private static final int MAGIC = 0x56344a31; // "V4J1"
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;

    private OutOfBandChannel(Socket socket, Duration timeout) throws IOException {
        this.socket = socket;
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(Math.max(1, Timeouts.intMillis("oob_read", timeout)));
        this.in = new DataInputStream(socket.getInputStream());
        this.out = new DataOutputStream(socket.getOutputStream());
    }

    /** Waits up to {@code timeout} for one peer on {@code server}. */
    public static OutOfBandChannel accept(ServerSocket server, Duration timeout) {
        try {
            server.setSoTimeout(Math.max(1, Timeouts.intMillis("oob_accept", timeout)));
            return new OutOfBandChannel(server.accept(), timeout);
        } catch (SocketTimeoutException e) {
            throw new VerbsTimeoutException(
                    "oob_accept",
                    "no peer connected to port " + server.getLocalPort() + " within " + timeout,
                    "start the peer, or wait longer");
        } catch (IOException e) {
            throw io("oob_accept", "accepting the out-of-band connection failed", e);
        }
    }

    /** Connects to {@code peer}, retrying refused connections until {@code timeout} passed. */
    public static OutOfBandChannel connect(InetSocketAddress peer, Duration timeout) {
        long deadline = Timeouts.deadline("oob_connect", timeout);
        IOException last = null;
        while (System.nanoTime() - deadline < 0) {
            Socket s = new Socket();
            try {
                long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
                s.connect(peer, (int) Math.min(left, 5_000));
                return new OutOfBandChannel(s, timeout);
            } catch (IOException e) {
                last = e;
                try {
                    s.close();
                } catch (IOException ignored) {
                    // nothing to release
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new VerbsException(
                            "oob_connect", Errno.EINTR, "interrupted while connecting to " + peer, null, ie);
                }
            }
        }
        VerbsTimeoutException t = new VerbsTimeoutException(
                "oob_connect", "could not connect to " + peer + " within " + timeout, "is the peer listening?");
        if (last != null) {
            t.initCause(last);
        }
        throw t;
    }

    /** Sends ours, receives the peer's. */
    public ConnectionData exchange(ConnectionData local) {
        try {
            write(local);
            return read();
        } catch (SocketTimeoutException e) {
            throw new VerbsTimeoutException("oob_exchange", "the peer sent no connection data in time", null);
        } catch (IOException e) {
            throw io("oob_exchange", "exchanging connection data failed", e);
        }
    }

    /** Blocks until the peer reaches its barrier too (each side sends and awaits one token). */
    public void barrier(String name) {
        try {
            out.writeUTF(name);
            out.flush();
            String theirs = in.readUTF();
            if (!theirs.equals(name)) {
                throw new VerbsException(
                        "oob_barrier",
                        Errno.EPROTO,
                        "out-of-band barrier mismatch: we are at '" + name + "', the peer at '" + theirs + "'",
                        "both sides must pass the same barriers in the same order");
            }
        } catch (SocketTimeoutException e) {
            throw new VerbsTimeoutException(
                    "oob_barrier", "the peer did not reach barrier '" + name + "' in time", null);
        } catch (EOFException e) {
            throw io("oob_barrier", "the peer closed the channel before barrier '" + name + "'", e);
        } catch (IOException e) {
            throw io("oob_barrier", "barrier '" + name + "' failed", e);
        }
    }

    /** Sends a long (e.g. a result) to the peer. */
    public void sendLong(long v) {
        try {
            out.writeLong(v);
            out.flush();
        } catch (IOException e) {
            throw io("oob_send", "sending a value failed", e);
        }
    }

    /** Receives a long from the peer. */
    public long receiveLong() {
        try {
            return in.readLong();
        } catch (IOException e) {
            throw io("oob_receive", "the peer sent no value in time", e);
        }
    }

    private void write(ConnectionData d) throws IOException {
        QueuePairEndpoint e = d.endpoint();
        out.writeInt(MAGIC);
        out.writeInt(e.qpNumber());
        out.writeInt(e.psn());
        out.writeInt(e.lid());
        out.writeBoolean(e.gid() != null);
        out.write(e.gid() != null ? e.gid().toBytes() : new byte[Gid.BYTES]);
        out.writeInt(e.mtu().value());
        out.writeLong(d.bufferAddress());
        out.writeInt(d.rkey());
        out.writeLong(d.bufferLength());
        out.flush();
    }

    private ConnectionData read() throws IOException {
        int magic = in.readInt();
        if (magic != MAGIC) {
            throw new IOException("not a verbs4j peer (magic 0x" + Integer.toHexString(magic) + ")");
        }
        int qpn = in.readInt();
        int psn = in.readInt();
        int lid = in.readInt();
        boolean hasGid = in.readBoolean();
        byte[] gid = new byte[Gid.BYTES];
        in.readFully(gid);
        Mtu mtu = Mtu.of(in.readInt());
        long addr = in.readLong();
        int rkey = in.readInt();
        long len = in.readLong();
        return new ConnectionData(
                new QueuePairEndpoint(qpn, psn, lid, hasGid ? Gid.of(gid) : null, mtu), addr, rkey, len);
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            throw io("oob_close", "closing the socket failed", e);
        }
    }

    private static VerbsException io(String verb, String detail, IOException e) {
        if (e instanceof SocketTimeoutException) {
            VerbsTimeoutException t = new VerbsTimeoutException(verb, detail, null);
            t.initCause(e);
            return t;
        }
        return new VerbsException(verb, Errno.EIO, detail + ": " + e, null, e);
    }
}
