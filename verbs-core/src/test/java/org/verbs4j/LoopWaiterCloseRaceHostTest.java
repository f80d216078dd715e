package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.verbs4j.internal.LoopWaiter;

/**
 * Host tier: an event loop's waiter closed while other threads wake it (what a loop's shutdown
 * meets when tasks are still being submitted to it). No wake-up may reach the event fd once it is
 * closed: it would fail with EBADF, or write 8 bytes into another owner's file that reused the fd
 * number. Two threads wake without pause while the waiter is closed, many times over; none of
 * their wake-ups may fail, and a wake-up after the close does nothing.
 */
class LoopWaiterCloseRaceHostTest {
    private static final int CYCLES = 400;

    @Test
    void wakeUpsRacingTheCloseNeverReachTheClosedFd() throws Exception {
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        AtomicLong wakes = new AtomicLong();
        for (int cycle = 0; cycle < CYCLES && failures.isEmpty(); cycle++) {
            LoopWaiter waiter = new LoopWaiter("LoopWaiterCloseRaceHostTest");
            assertEquals(LoopWaiter.Outcome.TIMED_OUT, waiter.await("await", -1, 0));
            waiter.wake();
            assertEquals(LoopWaiter.Outcome.WOKEN, waiter.await("await", -1, 1_000));
            CountDownLatch started = new CountDownLatch(2);
            var stop = new java.util.concurrent.atomic.AtomicBoolean();
            Thread[] threads = new Thread[2];
            for (int t = 0; t < threads.length; t++) {
                threads[t] = Thread.ofPlatform().start(() -> {
                    started.countDown();
                    try {
                        while (!stop.get()) {
                            waiter.wake();
                            wakes.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                });
            }
            started.await();
            waiter.close();
            stop.set(true);
            for (Thread t : threads) {
                t.join();
            }
            waiter.wake();
            waiter.close();
        }
        assertTrue(failures.isEmpty(), "a wake-up racing the close failed: " + failures);
        assertTrue(wakes.get() > 0, "the waking threads never woke the waiter");
    }
}
