package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The TCP side channel on loopback: connection data both ways, barriers, and bounded waits. */
class OutOfBandChannelTest {
    private static final Duration T = Duration.ofSeconds(10);

    @Test
    void exchangesConnectionDataBothWaysAndMeetsAtBarriers() throws Exception {
        Gid gid = Gid.ofAddress(InetAddress.getByName("10.0.0.1"));
        ConnectionData server = new ConnectionData(
                new QueuePairEndpoint(17, 0x123456, 0, gid, Mtu.MTU_1024), 0x7f00_0000_1000L, 0xabcd, 1L << 32);
        ConnectionData client = ConnectionData.of(new QueuePairEndpoint(42, 7, 3, null, Mtu.MTU_4096));
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<ConnectionData> seenByServer = CompletableFuture.supplyAsync(() -> {
                try (OutOfBandChannel ch = OutOfBandChannel.accept(ss, T)) {
                    ConnectionData peer = ch.exchange(server);
                    ch.barrier("connected");
                    ch.sendLong(99L);
                    return peer;
                }
            });
            ConnectionData seenByClient;
            try (OutOfBandChannel ch = OutOfBandChannel.connect(
                    new InetSocketAddress(InetAddress.getLoopbackAddress(), ss.getLocalPort()), T)) {
                seenByClient = ch.exchange(client);
                ch.barrier("connected");
                assertEquals(99L, ch.receiveLong());
            }
            assertEquals(server, seenByClient);
            assertEquals(client, seenByServer.get(10, TimeUnit.SECONDS));
            assertEquals(gid, seenByClient.endpoint().gid());
            assertNull(seenByServer.get().endpoint().gid());
        }
    }

    @Test
    void barrierMismatchIsReported() throws Exception {
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Void> server = CompletableFuture.runAsync(() -> {
                try (OutOfBandChannel ch = OutOfBandChannel.accept(ss, T)) {
                    ch.barrier("phase-1");
                } catch (VerbsException expected) {
                    // the client is elsewhere
                }
            });
            try (OutOfBandChannel ch = OutOfBandChannel.connect(
                    new InetSocketAddress(InetAddress.getLoopbackAddress(), ss.getLocalPort()), T)) {
                VerbsException e = assertThrows(VerbsException.class, () -> ch.barrier("phase-2"));
                assertTrue(e.getMessage().contains("phase-1") && e.getMessage().contains("phase-2"), e.getMessage());
            }
            server.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void waitsAreBounded() throws Exception {
        long t0 = System.nanoTime();
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            VerbsTimeoutException e = assertThrows(
                    VerbsTimeoutException.class, () -> OutOfBandChannel.accept(ss, Duration.ofMillis(300)));
            assertTrue(e.getMessage().contains("no peer connected"), e.getMessage());
        }
        int freePort;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            freePort = probe.getLocalPort();
        }
        VerbsTimeoutException e = assertThrows(
                VerbsTimeoutException.class,
                () -> OutOfBandChannel.connect(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), freePort), Duration.ofMillis(500)));
        assertTrue(e.getMessage().contains("could not connect"), e.getMessage());
        assertTrue(System.nanoTime() - t0 < 10_000_000_000L, "the bounded waits took too long");
    }
}
