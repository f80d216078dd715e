package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The exchange over loopback TCP: both roles of this implementation, and the byte layout a C peer sees. */
class PerftestTcpConnectionTest {
    private static final Duration T = Duration.ofSeconds(10);
    private static final byte[] GID = new byte[16];

    private static ServerSocket listener() throws Exception {
        ServerSocket s = new ServerSocket();
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        return s;
    }

    @Test
    void clientAndServerAgreeOnEveryStep() throws Exception {
        ServerSocket l = listener();
        int port = l.getLocalPort();
        KeyMessage sk = new KeyMessage(0, 1, 0x11, 0x22, 0x33, 0x44L, GID, 0);
        KeyMessage ck = new KeyMessage(0, 1, 0x55, 0x66, 0x77, 0x88L, GID, 0);
        CompletableFuture<Object[]> server = CompletableFuture.supplyAsync(() -> {
            try (PerftestTcpConnection c = PerftestTcpConnection.accept(l, T, true)) {
                PerfConnection.Negotiation n = c.negotiate(new PerfConnection.Negotiation("6.06", 4096, 64, 3));
                KeyMessage k = c.exchangeKeys(sk);
                c.sync(sk);
                BwReport r = c.exchangeReport(new BwReport(0, 0, 0, 0, 0));
                c.finish(sk);
                return new Object[] {n, k, r};
            }
        });
        try (PerftestTcpConnection c =
                PerftestTcpConnection.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), T, true)) {
            PerfConnection.Negotiation n = c.negotiate(new PerfConnection.Negotiation("6.06", 8192, 128, 5));
            assertEquals(new PerfConnection.Negotiation("6.06", 4096, 64, 3), n);
            assertEquals(sk, c.exchangeKeys(ck));
            c.sync(ck);
            c.exchangeReport(new BwReport(4096, 1000, 12.5, 11.25, 0.5));
            c.finish(ck);
        }
        Object[] s = server.get(10, TimeUnit.SECONDS);
        assertEquals(new PerfConnection.Negotiation("6.06", 8192, 128, 5), s[0]);
        assertEquals(ck, s[1]);
        assertEquals(new BwReport(4096, 1000, 12.5, 11.25, 0.5), s[2]);
    }

    /** A hand-written C-like client: the bytes in perftest's order and encodings. */
    @Test
    void wireBytesAreThoseOfPerftest() throws Exception {
        ServerSocket l = listener();
        int port = l.getLocalPort();
        KeyMessage sk = new KeyMessage(0, 1, 0x11, 0x22, 0x33, 0x44L, GID, 0);
        CompletableFuture<BwReport> server = CompletableFuture.supplyAsync(() -> {
            try (PerftestTcpConnection c = PerftestTcpConnection.accept(l, T, true)) {
                c.negotiate(new PerfConnection.Negotiation("6.06", 4096, 64, 3));
                c.exchangeKeys(sk);
                return c.exchangeReport(new BwReport(0, 0, 0, 0, 0));
            }
        });
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(10_000);
            OutputStream out = s.getOutputStream();
            DataInputStream in = new DataInputStream(s.getInputStream());
            byte[] v = new byte[16];
            System.arraycopy("6.06".getBytes(StandardCharsets.US_ASCII), 0, v, 0, 4);
            out.write(v);
            byte[] rv = new byte[16];
            in.readFully(rv);
            assertEquals("6.06", new String(rv, 0, 4, StandardCharsets.US_ASCII));
            assertEquals(0, rv[4]);
            out.write(ByteBuffer.allocate(4).putInt(4096).array());
            assertEquals(4096, in.readInt());
            out.write(ByteBuffer.allocate(4).putInt(64).array());
            assertEquals(64, in.readInt());
            out.write(new byte[] {'3', 0});
            byte[] mtu = new byte[2];
            in.readFully(mtu);
            assertEquals('3', mtu[0]);
            out.write(new KeyMessage(0, 1, 9, 9, 9, 9L, GID, 0).encode());
            byte[] key = new byte[108];
            in.readFully(key);
            assertEquals(sk, KeyMessage.decode(key));
            out.write(ByteBuffer.allocate(8).putLong(65536).array());
            assertEquals(0, in.readLong());
            out.write(ByteBuffer.allocate(8).putLong(5000).array());
            in.readLong();
            for (double d : new double[] {100.5, 99.25, 0.0016}) {
                out.write(ByteBuffer.allocate(8).putDouble(d).array());
                in.readDouble();
            }
        }
        assertEquals(new BwReport(65536, 5000, 100.5, 99.25, 0.0016), server.get(10, TimeUnit.SECONDS));
    }

    @Test
    void refusesAnOldPeer() throws Exception {
        ServerSocket l = listener();
        int port = l.getLocalPort();
        CompletableFuture<Void> client = CompletableFuture.runAsync(() -> {
            try (PerftestTcpConnection c = PerftestTcpConnection.connect(
                    new InetSocketAddress(InetAddress.getLoopbackAddress(), port), T, true)) {
                c.negotiate(new PerfConnection.Negotiation("5.60", 4096, 64, 3));
            } catch (RuntimeException expected) {
                // the server hangs up
            }
        });
        try (PerftestTcpConnection c = PerftestTcpConnection.accept(l, T, true)) {
            IllegalStateException e = assertThrows(
                    IllegalStateException.class,
                    () -> c.negotiate(new PerfConnection.Negotiation("6.06", 4096, 64, 3)));
            assertTrue(e.getMessage().contains("5.60"), e.getMessage());
        }
        client.get(10, TimeUnit.SECONDS);
    }
}
