package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the blocking waits of a completion channel, a {@link CompletionWaiter} and
 * {@link Context#nextAsyncEvent} on the stand-in provider, with idle channels whose fds are
 * eventfds that never signal. A waiting virtual thread unmounts (64 of them wait side by side,
 * not in turns on the few carriers); an interrupt, on a platform or a virtual thread, ends a
 * wait at once with the documented outcome; a close wakes every waiter with
 * {@link ResourceClosedException}. Waits for a real event: BlockingWaitsGuestTest.
 */
@NeedsNativeToolchain
class BlockingWaitsHostTest {
    private static final long JOIN_MILLIS = 60_000;

    private StandInProvider p;
    private Arena arena;
    private Context ctx;
    private int asyncFd = -1;
    private final List<NativeResource> toClose = new ArrayList<>();

    @BeforeEach
    void open() {
        p = StandInProvider.open();
        arena = Arena.ofShared();
        asyncFd = LibC.eventFd("eventfd", LibC.EFD_CLOEXEC);
        ctx = context(p, asyncFd);
    }

    /** A stand-in context whose async fd is {@code asyncFd}. */
    static Context context(StandInProvider p, int asyncFd) {
        MemorySegment raw = p.makeContext(true);
        raw.set(ValueLayout.JAVA_INT, ContextLayout.ASYNC_FD, asyncFd);
        return ForeignHandles.context(raw, "standin0");
    }

    @AfterEach
    void close() {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            if (toClose.get(i).isOpen()) {
                toClose.get(i).close();
            }
        }
        if (ctx.isOpen()) {
            ctx.close();
        }
        arena.close();
        p.close();
        LibC.close(asyncFd);
    }

    /** A channel on an idle eventfd (never readable), closing the fd when destroyed. */
    private CompletionChannel idleChannel() {
        CompletionChannel ch = idleChannel(ctx, arena);
        toClose.add(ch);
        return ch;
    }

    /** A channel of {@code ctx} on an idle eventfd (never readable), closing the fd when destroyed. */
    static CompletionChannel idleChannel(Context ctx, Arena arena) {
        int fd = LibC.eventFd("eventfd", LibC.EFD_CLOEXEC);
        MemorySegment fake = arena.allocate(16, 8);
        fake.set(ValueLayout.ADDRESS, 0, ctx.handle);
        fake.set(ValueLayout.JAVA_INT, ObjectLayout.COMP_CHANNEL_FD, fd);
        return new CompletionChannel(ctx, fake, h -> LibC.close(fd));
    }

    private static Thread.Builder builder(String kind) {
        return kind.equals("virtual") ? Thread.ofVirtual() : Thread.ofPlatform();
    }

    private static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(JOIN_MILLIS);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() - deadline < 0, "never happened: " + what);
            Thread.sleep(1);
        }
    }

    private static boolean waiting(Thread t) {
        Thread.State s = t.getState();
        return s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING;
    }

    /** What a waiter thread saw: its result or exception, and its interrupt status after the call. */
    private static final class Outcome {
        final AtomicReference<Object> result = new AtomicReference<>();
        final AtomicReference<Throwable> thrown = new AtomicReference<>();
        volatile boolean interruptedAfter;
        volatile boolean returned;
    }

    private static Thread start(String kind, Outcome o, java.util.function.Supplier<Object> call) {
        return builder(kind).start(() -> {
            try {
                o.result.set(call.get());
            } catch (Throwable t) {
                o.thrown.set(t);
            }
            o.interruptedAfter = Thread.currentThread().isInterrupted();
            o.returned = true;
        });
    }

    @Test
    void virtualWaitersOnIdleChannelsWaitSideBySide() throws Exception {
        int waiters = 64;
        long boundMillis = 500;
        List<CompletionChannel> channels = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            channels.add(idleChannel());
        }
        List<Outcome> outcomes = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < waiters; i++) {
            Outcome o = new Outcome();
            CompletionChannel ch = channels.get(i % channels.size());
            outcomes.add(o);
            threads.add(start("virtual", o, () -> ch.awaitEvent(Duration.ofMillis(boundMillis))));
        }
        for (Thread t : threads) {
            assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "a waiter did not return");
        }
        long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        System.out.println("[BlockingWaitsHostTest] " + waiters + " virtual waiters with " + boundMillis
                + " ms bounds on idle channels: " + tookMillis + " ms in all");
        for (Outcome o : outcomes) {
            assertNull(o.thrown.get(), () -> "no exception: " + o.thrown.get());
            assertNull(o.result.get(), "idle: every wait times out");
        }
        // pinned waiters take turns on the carriers: 64 x 500 ms / carriers (21 s+ seen); side by side ~0.5 s
        assertTrue(tookMillis < 5_000, "the waits ran side by side, not in turns: " + tookMillis + " ms");
    }

    @ParameterizedTest
    @ValueSource(strings = {"platform", "virtual"})
    void anInterruptEndsAnAwaitEventWithNullAndTheStatusKept(String kind) throws Exception {
        CompletionChannel ch = idleChannel();
        Outcome o = new Outcome();
        Thread t = start(kind, o, () -> ch.awaitEvent(Duration.ofSeconds(Long.MAX_VALUE)));
        awaitTrue(() -> ch.parked() == 1, "the waiter parked on the channel");
        t.interrupt();
        assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the interrupt ended the wait");
        assertNull(o.thrown.get(), () -> "no exception: " + o.thrown.get());
        assertTrue(o.returned);
        assertNull(o.result.get());
        assertTrue(o.interruptedAfter, "the interrupt status is kept");
        assertEquals(0, ch.parked());
    }

    @ParameterizedTest
    @ValueSource(strings = {"platform", "virtual"})
    void anInterruptedThreadDoesNotWaitAtAll(String kind) throws Exception {
        CompletionChannel ch = idleChannel();
        Outcome o = new Outcome();
        Thread t = start(kind, o, () -> {
            Thread.currentThread().interrupt();
            return ch.awaitEvent(Duration.ofSeconds(Long.MAX_VALUE));
        });
        assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "returned without waiting");
        assertNull(o.thrown.get(), () -> "no exception: " + o.thrown.get());
        assertNull(o.result.get());
        assertTrue(o.interruptedAfter);
    }

    @Test
    void closeWakesPlatformAndVirtualWaitersWithResourceClosed() throws Exception {
        CompletionChannel ch = idleChannel();
        List<Outcome> outcomes = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (String kind : List.of("platform", "virtual", "platform", "virtual")) {
            Outcome o = new Outcome();
            outcomes.add(o);
            threads.add(start(kind, o, () -> ch.awaitEvent(Duration.ofSeconds(Long.MAX_VALUE))));
        }
        awaitTrue(() -> ch.parked() == threads.size(), "every waiter parked on the channel");
        ch.close();
        for (Thread t : threads) {
            assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the close woke the waiter");
        }
        for (Outcome o : outcomes) {
            ResourceClosedException e = assertInstanceOf(ResourceClosedException.class, o.thrown.get());
            assertEquals("ibv_get_cq_event", e.verb());
            assertEquals(Errno.EBADF, e.errno(), e.getMessage());
        }
        assertFalse(ch.isOpen());
    }

    @ParameterizedTest
    @ValueSource(strings = {"platform", "virtual"})
    void anInterruptEndsABlockedCompletionWaiterWithEintr(String kind) throws Exception {
        CompletionChannel ch = idleChannel();
        CompletionQueue cq = new CompletionQueue(ctx, p.cq().reinterpret(ObjectLayout.CQ_SIZE), ch, h -> {});
        toClose.add(cq);
        CompletionWaiter waiter = new CompletionWaiter(cq, 0);
        Outcome o = new Outcome();
        Thread t = start(kind, o, () -> {
            try (WorkCompletions wcs = new WorkCompletions(4)) {
                return waiter.await(wcs, 1, Duration.ofSeconds(Long.MAX_VALUE));
            }
        });
        awaitTrue(() -> ch.parked() == 1, "the waiter blocked on the channel");
        t.interrupt();
        assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the interrupt ended the wait");
        VerbsException e = assertInstanceOf(VerbsException.class, o.thrown.get());
        assertEquals(Errno.EINTR, e.errno(), e.getMessage());
        assertTrue(o.interruptedAfter, "the interrupt status is kept");
        assertEquals(1, waiter.blocks(), "one block for the whole wait");
    }

    @ParameterizedTest
    @ValueSource(strings = {"platform", "virtual"})
    void anInterruptEndsNextAsyncEventWithEmptyAndTheStatusKept(String kind) throws Exception {
        Outcome o = new Outcome();
        Thread t = start(kind, o, () -> ctx.nextAsyncEvent(Duration.ofSeconds(Long.MAX_VALUE)));
        awaitTrue(() -> waiting(t), "the waiter waits for an event");
        t.interrupt();
        assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the interrupt ended the wait");
        assertNull(o.thrown.get(), () -> "no exception: " + o.thrown.get());
        assertEquals(Optional.empty(), o.result.get());
        assertTrue(o.interruptedAfter, "the interrupt status is kept");
    }

    @Test
    void closingTheContextWakesAnAsyncEventWaiter() throws Exception {
        Outcome o = new Outcome();
        Thread t = start("virtual", o, () -> ctx.nextAsyncEvent(Duration.ofSeconds(Long.MAX_VALUE)));
        awaitTrue(() -> waiting(t), "the waiter waits for an event");
        ctx.close();
        assertTrue(t.join(Duration.ofMillis(JOIN_MILLIS)), "the close woke the waiter");
        VerbsException e = assertInstanceOf(VerbsException.class, o.thrown.get());
        assertEquals(Errno.EBADF, e.errno(), e.getMessage());
    }
}
