package org.verbs4j.cm;

import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.verbs4j.ResourceClosedException;

/**
 * The future of one asynchronous connect or accept ({@link RdmaConnection#connectAsync},
 * {@link ConnectionRequest#acceptAsync}): the connection it sets up, its deadline (a timer
 * completes it with the timeout exception when the connection manager has not answered by then),
 * and the one outcome it gets. The setup steps themselves run where the connection's events are
 * read (the channel's event thread, or the thread polling a polled channel).
 *
 * <p>Settled once: the first of success, failure, timeout and {@link #cancel} wins. On failure or
 * timeout, a future that owns its connection marks it CLOSED before it completes and releases its
 * queue pair, queues and cm id on a releaser thread (counted by the channel, whose close waits for
 * them), so that the outcome comes at the deadline, not after the kernel answered the release; a
 * cancellation closes it on the cancelling thread.
 */
final class SetupFuture extends CompletableFuture<RdmaConnection> {
    /** One daemon thread for the deadlines of every setup in the JVM (each task only completes a future). */
    private static final ScheduledThreadPoolExecutor TIMERS;

    static {
        TIMERS = new ScheduledThreadPoolExecutor(
                1, Thread.ofPlatform().daemon().name("verbs4j-cm-deadlines").factory());
        TIMERS.setRemoveOnCancelPolicy(true);
    }

    /**
     * Loads and links, once per JVM, what a timeout runs: called by the opening of a channel,
     * before any setup's deadline runs (the first opening in a JVM pays for it, later ones return
     * at once).
     */
    static void prepareTimeouts() {
        TimeoutPath.prepared();
    }

    /**
     * Runs once, in its initialiser, what a timeout does the first time in a JVM and costs there:
     * the load of the classes a timed-out setup uses (each a class-path search), the link of the
     * {@code strerror} downcall that every exception's message reads, the classes of an exceptional
     * completion, and the release queue's thread. Cold, in a TCG guest, each class took 0.3-0.5 s
     * to load; done at the deadline of a hundred setups timing out together, every one of them
     * waited for it and returned that much after its bound. A thread of its own, started by the
     * first setup, was no answer: among a hundred threads setting up connections, it got its share
     * of the processors and was not done by the first deadline.
     */
    private static final class TimeoutPath {
        static {
            try {
                RuntimeException x = RdmaConnection.timeoutException(
                        "rdma_connect", "warming up", ConnectionState.ROUTE_RESOLVED, null);
                CompletableFuture<Object> f = new CompletableFuture<>();
                f.completeExceptionally(x);
                f.exceptionNow();
                RdmaConnection.prepareTimeoutPath();
                java.lang.invoke.MethodHandles.lookup().ensureInitialized(DeadlinePassed.class);
                RdmaConnection.releaseLater(() -> {});
                SetupTimings.warmUp();
            } catch (RuntimeException | Error | IllegalAccessException e) { // only the first timeout is slower then
                org.slf4j.LoggerFactory.getLogger(SetupFuture.class).debug("preparing timeouts: {}", e.toString());
            }
        }

        private TimeoutPath() {}

        static void prepared() {
            // the initialiser did the work
        }
    }

    /**
     * The threads that make the queue pairs and send the requests and accepts of setups on channels
     * with their own event thread (one per processor, at least two; daemons): those steps are the
     * longest (several system calls each), and run here so that the event thread goes on reading
     * events and the setups of many connections proceed at once.
     */
    static final ExecutorService STEPS = Executors.newFixedThreadPool(
            Math.max(2, Runtime.getRuntime().availableProcessors()),
            Thread.ofPlatform().daemon().name("verbs4j-cm-setup-", 0).factory());

    final RdmaConnection connection;
    final long deadline;
    private final boolean ownsConnection;
    private final AtomicBoolean settled = new AtomicBoolean();
    /**
     * The step the setup is at, named by the state it waits for (ADDRESS_RESOLVED, ROUTE_RESOLVED,
     * CONNECTED): each step is taken once, by compare-and-set (see {@link RdmaConnection#advanceSetup});
     * it also names the verb of a timeout.
     */
    final AtomicReference<ConnectionState> step;

    /** What the setup is doing now, for the messages ("resolving the route to …"). */
    volatile String doing;
    /** Active side: where to, and the request's private data (set before the first step). */
    volatile java.net.InetSocketAddress remote;

    volatile byte[] privateData;

    private volatile ScheduledFuture<?> timer;

    /**
     * What a blocking connect or accept waits on, notified once, when the future is settled: not
     * the connection's lock, which every event of the setup notifies (each notify woke the
     * waiting caller for nothing, and the event thread then handed it the lock as it left).
     */
    private final Object settledMonitor = new Object();

    /** Blocking callers in {@link #await}: while there is one, it times the setup out, not the timer (cancelled then). */
    private final java.util.concurrent.atomic.AtomicInteger blockingCallers =
            new java.util.concurrent.atomic.AtomicInteger();

    SetupFuture(
            RdmaConnection connection, long deadline, boolean ownsConnection, String doing, ConnectionState target) {
        this.connection = connection;
        this.deadline = deadline;
        this.ownsConnection = ownsConnection;
        this.doing = doing;
        this.step = new AtomicReference<>(target);
    }

    /** Arms the deadline (after the future is reachable from its connection). */
    void startTimer() {
        long left = deadline - System.nanoTime();
        // the timer thread only hands the timeout on: failing closes the connection, and the setups
        // that time out together must not close one after another
        timer = TIMERS.schedule(
                () -> {
                    SetupTimings.late("deadline timer fired", deadline);
                    // a blocking caller fails its own setup at the deadline: racing it would leave it
                    // waiting for the releaser thread, which settles the setups that time out together
                    // one after another
                    if (!isDone() && blockingCallers.get() == 0) {
                        RdmaConnection.releaseLater(this::timeOut);
                    }
                },
                Math.max(0, left),
                TimeUnit.NANOSECONDS);
        if (isDone()) {
            timer.cancel(false);
        }
    }

    /**
     * The deadline passed: fails with the timeout exception of the step in progress, unless
     * settled; returns that exception when this call settled the future, else null.
     */
    RuntimeException timeOut() {
        SetupTimings.late("timeout handling began", deadline);
        if (isDone()) {
            return null;
        }
        RuntimeException x = connection.timeoutException(step.get(), doing);
        SetupTimings.late("timeout exception built", deadline);
        return fail(x) ? x : null;
    }

    /** Completes with the connection, unless settled. */
    void succeed() {
        if (settled.compareAndSet(false, true)) {
            complete(connection);
            done();
        }
    }

    /** Fails with {@code x} (closing an owned connection first), unless settled; whether this call settled it. */
    boolean fail(Throwable x) {
        if (!settled.compareAndSet(false, true)) {
            return false;
        }
        try {
            if (ownsConnection) {
                connection.closeInBackground(deadline); // CLOSED now; its native objects released off this path
                SetupTimings.late("connection marked closed", deadline);
            }
        } finally {
            completeExceptionally(x);
            done();
            SetupTimings.late("future completed", deadline);
        }
        return true;
    }

    /**
     * Cancels the setup: completes with {@link CancellationException}, then closes the connection
     * the future owns (its cm id is destroyed, the peer sees its request go away). False when the
     * setup was settled already.
     */
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        if (!settled.compareAndSet(false, true)) {
            return false;
        }
        boolean r = super.cancel(mayInterruptIfRunning);
        try {
            if (ownsConnection) {
                connection.close();
            }
        } finally {
            done();
        }
        return r;
    }

    private void done() {
        ScheduledFuture<?> t = timer;
        // past the deadline the timer's task is due: it sees the future done; a cancel would only
        // queue here for the timer's lock, behind a timer thread that may be running late
        if (t != null && deadline - System.nanoTime() > 0) {
            t.cancel(false);
        }
        synchronized (settledMonitor) { // a blocking connect or accept waits on it
            settledMonitor.notifyAll();
        }
    }

    /**
     * The blocking call's wait: until settled or the deadline (driving a polled channel, or the
     * channel from its own event thread, meanwhile); returns the connection or throws what the
     * setup failed with, as it was raised (naming its verb). Never waits more than
     * {@link #SETTLING_NANOS} past the deadline: then it throws the step's timeout exception.
     */
    RdmaConnection await() {
        blockingCallers.incrementAndGet();
        // this caller times its setup out itself: the timer would only wake at the deadline to see
        // it waiting (a hundred setups timing out together woke it a hundred times then)
        ScheduledFuture<?> t = timer;
        if (t != null) {
            t.cancel(false);
        }
        try {
            return awaitSettled();
        } finally {
            // a caller that left otherwise (interrupted) hands the timeout on: past the deadline to
            // the releaser thread, before it to a timer armed again
            if (blockingCallers.decrementAndGet() == 0 && !isDone()) {
                if (deadline - System.nanoTime() <= 0) {
                    RdmaConnection.releaseLater(this::timeOut);
                } else {
                    startTimer();
                }
            }
        }
    }

    private RdmaConnection awaitSettled() {
        try {
            connection.await(
                    settledMonitor,
                    Duration.ofNanos(Math.max(1, deadline - System.nanoTime())),
                    () -> isDone() ? Boolean.TRUE : null,
                    DeadlinePassed::new);
        } catch (DeadlinePassed e) {
            SetupTimings.late("the blocking caller woke", deadline);
            // this thread fails its own setup (outside the connection's lock) and throws at once,
            // whatever the deadline timer is doing; unless another thread settled it first
            RuntimeException x = timeOut();
            if (x != null) {
                SetupTimings.late("the blocking caller returns", deadline);
                throw x;
            }
        }
        // settled, though maybe not yet completed: a timer's releaser that settled it first may
        // still be closing the connection; its outcome is waited for only a little past the deadline
        RuntimeException x = outcome(
                Math.max(0, deadline - System.nanoTime()) + SETTLING_NANOS,
                () -> connection.timeoutException(step.get(), doing));
        SetupTimings.late("the blocking caller returns", deadline);
        if (x != null) {
            throw x;
        }
        return connection;
    }

    /** The blocking wait reached the deadline (never leaves this class). */
    private static final class DeadlinePassed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        DeadlinePassed() {
            super(null, null, false, false);
        }
    }

    /** How long past the deadline a blocking caller waits for the thread that settled its setup to complete it. */
    static final long SETTLING_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

    /**
     * The exception this future completed with (an Error is thrown), or null after success; when
     * it is not completed within {@code waitNanos} (or the wait is interrupted), {@code late}'s.
     */
    RuntimeException outcome(long waitNanos, Supplier<RuntimeException> late) {
        try {
            get(waitNanos, TimeUnit.NANOSECONDS);
            return null;
        } catch (TimeoutException e) {
            return late.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return late.get();
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException r) {
                return r;
            }
            if (c instanceof Error er) {
                throw er;
            }
            return new CompletionException(c);
        } catch (CancellationException e) {
            return new ResourceClosedException(
                    "rdma_connect", "the setup was cancelled while " + doing, "cancel only a setup you give up on");
        }
    }
}
