package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: every public timed call of the core API takes any {@link Duration}. A negative one
 * counts as zero (the call does not wait: it returns its timeout outcome at once); one too long
 * for a {@code long} of nanoseconds ({@code Duration.ofSeconds(Long.MAX_VALUE)}) waits as if
 * forever instead of throwing an {@link ArithmeticException}: the call either finds its result
 * at once or waits until an interrupt ends it. The pool's timed calls: pool.PoolTimeoutsTest;
 * connection management's: BlockingWaitsGuestTest.
 */
@NeedsNativeToolchain
class TimedCallsHostTest {
    private static final Duration HUGE = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);
    private static final Duration MOST_NEGATIVE = Duration.ofSeconds(Long.MIN_VALUE);

    private StandInProvider p;
    private Arena arena;
    private Context ctx;
    private CompletionChannel channel;
    private CompletionQueue cq;
    private int asyncFd;

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        asyncFd = LibC.eventFd("eventfd", LibC.EFD_CLOEXEC);
        ctx = BlockingWaitsHostTest.context(p, asyncFd);
        channel = BlockingWaitsHostTest.idleChannel(ctx, arena);
        cq = new CompletionQueue(ctx, p.cq().reinterpret(ObjectLayout.CQ_SIZE), channel, h -> {});
    }

    @AfterEach
    void close() {
        for (NativeResource r : new NativeResource[] {cq, channel, ctx}) {
            if (r.isOpen()) {
                r.close();
            }
        }
        arena.close();
        p.close();
        LibC.close(asyncFd);
    }

    /** One timed call: what it does with a negative timeout, and with a huge one. */
    private record TimedCall(String method, Consumer<TimedCallsHostTest> negative, Consumer<TimedCallsHostTest> huge) {
        @Override
        public String toString() {
            return method;
        }
    }

    private void queueOne() {
        assertEquals(
                0,
                p.queueCompletion(7, CompletionStatus.SUCCESS, CompletionOpcode.RDMA_WRITE, 8, StandInProvider.QP_NUM));
    }

    /** Runs {@code call} on another thread, interrupts it once it waits, and returns what it returned. */
    private static Object interruptedOnceWaiting(java.util.function.Supplier<Object> call) {
        AtomicReference<Object> result = new AtomicReference<>();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread t = Thread.ofVirtual().start(() -> {
            try {
                result.set(call.get());
            } catch (Throwable e) {
                thrown.set(e);
            }
        });
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
                assertTrue(t.isAlive(), () -> "the call returned instead of waiting: " + result + ", " + thrown);
                assertTrue(System.nanoTime() - deadline < 0, "the call never waited");
                Thread.sleep(1);
            }
            t.interrupt();
            assertTrue(t.join(Duration.ofSeconds(60)), "the interrupt ended the wait");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        assertNull(thrown.get(), () -> "no exception: " + thrown.get());
        return result.get();
    }

    static Stream<Arguments> timedCalls() {
        return Stream.of(
                        new TimedCall(
                                "CompletionChannel.awaitEvent",
                                t -> assertNull(t.channel.awaitEvent(MOST_NEGATIVE)),
                                t -> assertNull(interruptedOnceWaiting(() -> t.channel.awaitEvent(HUGE)))),
                        new TimedCall(
                                "CompletionWaiter.await",
                                t -> {
                                    try (WorkCompletions wcs = new WorkCompletions(2)) {
                                        assertEquals(0, new CompletionWaiter(t.cq, 0).await(wcs, 1, MOST_NEGATIVE));
                                    }
                                },
                                t -> {
                                    t.queueOne();
                                    try (WorkCompletions wcs = new WorkCompletions(2)) {
                                        assertEquals(1, new CompletionWaiter(t.cq, 0).await(wcs, 1, HUGE));
                                    }
                                }),
                        new TimedCall(
                                "CompletionQueue.poll",
                                t -> {
                                    try (WorkCompletions wcs = new WorkCompletions(2)) {
                                        assertEquals(0, t.cq.poll(wcs, 1, MOST_NEGATIVE));
                                    }
                                },
                                t -> {
                                    t.queueOne();
                                    try (WorkCompletions wcs = new WorkCompletions(2)) {
                                        assertEquals(1, t.cq.poll(wcs, 1, HUGE));
                                    }
                                }),
                        new TimedCall(
                                "Context.nextAsyncEvent",
                                t -> assertEquals(Optional.empty(), t.ctx.nextAsyncEvent(MOST_NEGATIVE)),
                                t -> assertEquals(
                                        Optional.empty(), interruptedOnceWaiting(() -> t.ctx.nextAsyncEvent(HUGE)))),
                        new TimedCall(
                                "OutOfBandChannel.accept",
                                t -> {
                                    try (ServerSocket server =
                                            new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                                        assertThrows(
                                                VerbsTimeoutException.class,
                                                () -> OutOfBandChannel.accept(server, MOST_NEGATIVE));
                                    } catch (IOException e) {
                                        throw new AssertionError(e);
                                    }
                                },
                                t -> oobPair(HUGE)),
                        new TimedCall(
                                "OutOfBandChannel.connect",
                                t -> assertThrows(
                                        VerbsTimeoutException.class,
                                        () -> OutOfBandChannel.connect(
                                                new InetSocketAddress(InetAddress.getLoopbackAddress(), 9),
                                                MOST_NEGATIVE)),
                                t -> oobPair(HUGE)))
                .map(Arguments::of);
    }

    /** accept and connect, both with {@code timeout}, meet. */
    private static void oobPair(Duration timeout) {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread client = Thread.ofVirtual().start(() -> {
                try (OutOfBandChannel c = OutOfBandChannel.connect(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort()), timeout)) {
                    assertNotNull(c);
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            try (OutOfBandChannel s = OutOfBandChannel.accept(server, timeout)) {
                assertNotNull(s);
            }
            assertTrue(client.join(Duration.ofSeconds(60)));
            assertNull(failed.get(), () -> "connect: " + failed.get());
        } catch (IOException | InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    @ParameterizedTest
    @MethodSource("timedCalls")
    void aNegativeTimeoutCountsAsZero(TimedCall call) {
        call.negative.accept(this);
    }

    @ParameterizedTest
    @MethodSource("timedCalls")
    void aTimeoutTooLongForNanosecondsWaitsAsIfForever(TimedCall call) {
        call.huge.accept(this);
    }

    @Test
    void aNullTimeoutIsRefusedNamingTheCall() {
        InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> channel.awaitEvent(null));
        assertEquals("ibv_get_cq_event", e.verb());
        assertTrue(e.getMessage().contains("timeout is null"), e.getMessage());
        try (WorkCompletions wcs = new WorkCompletions(2)) {
            assertThrows(InvalidRequestException.class, () -> cq.poll(wcs, 1, null));
            assertThrows(
                    InvalidRequestException.class, () -> new CompletionWaiter(cq, 0).await(wcs, 1, (Duration) null));
        }
        assertThrows(InvalidRequestException.class, () -> ctx.nextAsyncEvent(null));
    }

    @Test
    void theConversionSaturatesAndClampsNegativeToZero() {
        for (Duration d : List.of(MOST_NEGATIVE, Duration.ofNanos(-1), Duration.ofSeconds(-1, 999_999_999))) {
            assertEquals(0, Timeouts.nanos("t", d), d.toString());
            assertEquals(0, Timeouts.millis("t", d), d.toString());
        }
        assertEquals(Timeouts.FOREVER_NANOS, Timeouts.nanos("t", HUGE));
        assertEquals(Timeouts.FOREVER_NANOS, Timeouts.nanos("t", Duration.ofNanos(Long.MAX_VALUE)));
        assertEquals(Integer.MAX_VALUE, Timeouts.intMillis("t", HUGE));
        assertEquals(1_500_000_001L, Timeouts.nanos("t", Duration.ofSeconds(1, 500_000_001)));
        assertEquals(1_501, Timeouts.millis("t", Duration.ofSeconds(1, 500_000_001)), "rounded up");
        assertEquals(0, Timeouts.nanos("t", Duration.ZERO));
        long before = System.nanoTime();
        long deadline = Timeouts.deadline("t", HUGE);
        assertTrue(deadline - before >= Timeouts.FOREVER_NANOS, "far away");
        assertTrue(deadline - System.nanoTime() > 0, "in the future, without overflow");
        assertInstanceOf(
                InvalidRequestException.class, assertThrows(VerbsException.class, () -> Timeouts.nanos("t", null)));
    }
}
