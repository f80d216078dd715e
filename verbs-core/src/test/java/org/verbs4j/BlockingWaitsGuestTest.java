package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.cm.CmEventChannel;
import org.verbs4j.cm.CmListener;
import org.verbs4j.cm.ConnectionRequest;
import org.verbs4j.cm.ConnectionSetup;
import org.verbs4j.cm.ConnectionState;
import org.verbs4j.cm.RdmaConnection;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier, rxe: blocking waits on real completion channels. Virtual waiters unmount while
 * they wait (64 of them with 500 ms bounds finish together, not in turns on the carriers); an
 * interrupt ends a virtual waiter's wait; a close wakes it with {@link ResourceClosedException}.
 * And the connection manager's timed calls take any {@link Duration}: a negative one counts as
 * zero, {@code Duration.ofSeconds(Long.MAX_VALUE)} waits as if forever (a connect and an accept
 * with it succeed). An event that wakes a parked waiter: CompletionWaiterGuestTest.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class BlockingWaitsGuestTest {
    private static final Duration HUGE = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);
    private static final Duration MOST_NEGATIVE = Duration.ofSeconds(Long.MIN_VALUE);
    private static final long JOIN_MILLIS = 60_000;
    private static final int PORT = 30_000 + (int) (ProcessHandle.current().pid() % 10_000);

    private Context ctx;

    @BeforeAll
    void open() {
        ctx = LoopbackPair.openTestDevice();
    }

    @AfterAll
    void close() {
        ctx.close();
    }

    @Test
    void virtualWaitersOnIdleChannelsWaitSideBySide() throws Exception {
        List<CompletionChannel> channels = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            channels.add(ctx.createCompletionChannel());
        }
        try {
            int waiters = 64;
            waitSideBySide(channels, waiters, Duration.ofMillis(1)); // first calls (class loading, linking) untimed
            long tookMillis = waitSideBySide(channels, waiters, Duration.ofMillis(500));
            System.out.println("[BlockingWaitsGuestTest] " + waiters
                    + " virtual waiters with 500 ms bounds on idle rxe channels: " + tookMillis + " ms in all");
            // pinned, they take turns on the guest's 2 carriers: 64 x 500 ms / 2 = 16 s; side by side ~0.5 s
            assertTrue(tookMillis < 5_000, "the waits ran side by side, not in turns: " + tookMillis + " ms");
        } finally {
            channels.forEach(CompletionChannel::close);
        }
    }

    /** {@code waiters} virtual threads wait {@code bound} on the idle {@code channels}; how long they took in all. */
    private static long waitSideBySide(List<CompletionChannel> channels, int waiters, Duration bound)
            throws InterruptedException {
        List<AtomicReference<Object>> outcomes = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < waiters; i++) {
            CompletionChannel ch = channels.get(i % channels.size());
            AtomicReference<Object> o = new AtomicReference<>("did not return");
            outcomes.add(o);
            threads.add(Thread.ofVirtual().start(() -> {
                try {
                    o.set(ch.awaitEvent(bound));
                } catch (Throwable t) {
                    o.set(t);
                }
            }));
        }
        for (Thread t : threads) {
            assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "a waiter did not return");
        }
        long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        for (AtomicReference<Object> o : outcomes) {
            assertNull(o.get(), "idle: every wait times out");
        }
        return tookMillis;
    }

    @Test
    void aVirtualWaiterIsInterruptedOrWokenByClose() throws Exception {
        CompletionChannel ch = ctx.createCompletionChannel();
        try {
            AtomicReference<Object> outcome = new AtomicReference<>("did not return");
            AtomicReference<Boolean> status = new AtomicReference<>();
            Thread t = Thread.ofVirtual().start(() -> {
                outcome.set(ch.awaitEvent(HUGE));
                status.set(Thread.currentThread().isInterrupted());
            });
            awaitParked(ch, 1);
            t.interrupt();
            assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the interrupt ended the wait");
            assertNull(outcome.get());
            assertEquals(Boolean.TRUE, status.get(), "the interrupt status is kept");

            AtomicReference<Throwable> thrown = new AtomicReference<>();
            Thread u = Thread.ofVirtual().start(() -> {
                try {
                    ch.awaitEvent(HUGE);
                } catch (Throwable e) {
                    thrown.set(e);
                }
            });
            awaitParked(ch, 1);
            ch.close();
            assertTrue(u.join(Duration.ofMillis(JOIN_MILLIS)), "the close woke the waiter");
            assertInstanceOf(ResourceClosedException.class, thrown.get());
        } finally {
            if (ch.isOpen()) {
                ch.close();
            }
        }
    }

    private static void awaitParked(CompletionChannel ch, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(JOIN_MILLIS);
        while (ch.parked() != n) {
            assertTrue(System.nanoTime() - deadline < 0, "the waiter never parked");
            Thread.sleep(1);
        }
    }

    @Test
    void connectionManagementTimedCallsTakeAnyDuration() throws Exception {
        InetSocketAddress address = new InetSocketAddress(InetAddress.getByName(RdmaTestSupport.guestIp()), PORT);
        CmEventChannel ch = CmEventChannel.open();
        CmListener listener = CmListener.bind(ch, address, 4);
        RdmaConnection client = null;
        AtomicReference<Object> server = new AtomicReference<>();
        try {
            assertThrows(VerbsTimeoutException.class, () -> listener.accept(MOST_NEGATIVE), "no wait when negative");
            Thread accepter = Thread.ofVirtual().start(() -> {
                try {
                    ConnectionRequest r = listener.accept(HUGE);
                    server.set(r.accept(new ConnectionSetup(), null, HUGE));
                } catch (Throwable e) {
                    server.set(e);
                }
            });
            client = RdmaConnection.connect(ch, address, new ConnectionSetup(), null, HUGE);
            assertTrue(accepter.join(Duration.ofMillis(JOIN_MILLIS)), "accepted");
            RdmaConnection srv = assertInstanceOf(RdmaConnection.class, server.get());
            try {
                assertEquals(ConnectionState.CONNECTED, client.awaitState(EnumSet.of(ConnectionState.CONNECTED), HUGE));
                assertFalse(client.awaitDisconnect(MOST_NEGATIVE), "no wait when negative");
            } finally {
                srv.close();
            }
            assertThrows(InvalidRequestException.class, () -> new ConnectionSetup().addressTimeout(HUGE));
            assertThrows(InvalidRequestException.class, () -> new ConnectionSetup().routeTimeout(MOST_NEGATIVE));
        } finally {
            if (client != null) {
                client.close();
            }
            listener.close();
            ch.close(HUGE);
        }
        CmEventChannel polled = CmEventChannel.openPolled();
        assertEquals(0, polled.processEvents(MOST_NEGATIVE), "no wait when negative");
        polled.close(MOST_NEGATIVE);
    }
}
