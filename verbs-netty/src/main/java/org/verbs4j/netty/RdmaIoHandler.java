package org.verbs4j.netty;

import io.netty.channel.EventLoop;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.ThreadAwareExecutor;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairState;
import org.verbs4j.internal.LoopWaiter;

/**
 * The I/O handler of one event loop of a {@code MultiThreadIoEventLoopGroup}: it owns a
 * completion channel (for the RDMA device its connections use) and the loop's wake-up event fd,
 * and drives the channels registered with it. Each loop iteration blocks in {@code poll(2)} on
 * the completion channel and the wake-up fd together until a completion, a task or the next
 * scheduled task is due (no spinning), then reaps the completion queues that raised events;
 * with {@link RdmaTransportConfig#busyPoll()} it never blocks and polls every queue each turn.
 * Connection-manager events (connects, accepts, disconnects) are read by the library's event
 * thread and handed to the loop as tasks.
 *
 * <p>Use: {@code new MultiThreadIoEventLoopGroup(n, RdmaIoHandler.newFactory())} with
 * {@link RdmaSocketChannel} and {@link RdmaServerSocketChannel}. Netty calls every method but
 * {@link #wakeup()} on the loop thread; {@link #completionChannel} is called by connecting threads.
 * One loop serves the connections of one RDMA device (the first one it is given).
 */
public final class RdmaIoHandler implements IoHandler {
    static final Logger LOG = LoggerFactory.getLogger(RdmaIoHandler.class);

    /**
     * How the loops' waits in this JVM ended (by a completion event, a wake-up, the timeout) and
     * the completion events they reaped: the signal that every frame was brought by an event.
     */
    static final AtomicLong WAITS_READABLE = new AtomicLong(),
            WAITS_WOKEN = new AtomicLong(),
            WAITS_TIMED_OUT = new AtomicLong(),
            EVENTS = new AtomicLong();

    /**
     * How long a closing connection on the shared receive queue waits at most for its queue pair's
     * {@code IBV_EVENT_QP_LAST_WQE_REACHED} ({@link #awaitLastWqe}).
     */
    static final long LAST_WQE_WAIT_MS = 200;
    /**
     * Those waits in this JVM: ended by the event, ended by the bound, and the nanoseconds waited
     * for the events that came.
     */
    static final AtomicLong LAST_WQE_ARRIVED = new AtomicLong(),
            LAST_WQE_MISSED = new AtomicLong(),
            LAST_WQE_NANOS = new AtomicLong();

    private final RdmaTransportConfig config;
    private final boolean unboundedWait;
    private final LoopWaiter waiter = new LoopWaiter("RdmaIoHandler");
    private final Set<RdmaIoHandle> handles = new HashSet<>();
    private final Map<CompletionQueue, RdmaIoHandle> byQueue = new IdentityHashMap<>();
    private final List<RdmaIoHandle> scratch = new ArrayList<>();
    private volatile Context context;
    private volatile CompletionChannel channel;
    private volatile int channelFd = -1;
    private final ThreadAwareExecutor executor;
    /** The handlers of the live loops, for {@link #stats(EventLoop)}. */
    private static final Map<Object, RdmaIoHandler> LOOPS = new java.util.concurrent.ConcurrentHashMap<>();
    // the loop's receive reservations (under this handler's lock): bytes, connections, credits
    private long reservedBytes;
    private int reservations, creditsReserved;
    private volatile SharedReceives shared;
    /** The loop's shared send buffers: made and closed with {@link #shared} (null without). */
    private volatile SharedSends sends;
    // the loop is gone (under this handler's lock): the last reservation given back closes what it left
    private boolean destroyed;
    /** Misses in a row, none ever seen, after which a loop stops waiting for LAST_WQE_REACHED. */
    static final int LAST_WQE_MISSES_TO_STOP = 3;
    // loop thread: this loop's device sent a LAST_WQE_REACHED; it missed that many in a row before
    // any came (then: never waited for again, the device does not send it)
    private boolean lastWqeSeen, lastWqeNeverSent;
    private int lastWqeMissesInARow;

    private RdmaIoHandler(RdmaTransportConfig config, boolean unboundedWait, ThreadAwareExecutor executor) {
        this.config = config;
        this.unboundedWait = unboundedWait;
        this.executor = executor;
        LOOPS.put(executor, this);
    }

    /** A factory of handlers with the {@link RdmaTransportConfig#defaults()}. */
    public static IoHandlerFactory newFactory() {
        return newFactory(RdmaTransportConfig.defaults());
    }

    /** A factory of handlers with {@code config}. */
    public static IoHandlerFactory newFactory(RdmaTransportConfig config) {
        return newFactory(config, false);
    }

    /**
     * With {@code unboundedWait}, the loop waits for an event or a wake-up only, never for the
     * next scheduled task (for tests: a wake-up that only a timer would bring never comes).
     */
    static IoHandlerFactory newFactory(RdmaTransportConfig config, boolean unboundedWait) {
        java.util.Objects.requireNonNull(config, "config");
        return new IoHandlerFactory() {
            @Override
            public IoHandler newHandler(ThreadAwareExecutor executor) {
                return new RdmaIoHandler(config, unboundedWait, executor);
            }
        };
    }

    /** The transport's totals in this JVM (registered memory, connections, posted receives). */
    public static RdmaStats stats() {
        return RdmaStats.snapshot();
    }

    /**
     * The receive memory of event loop {@code loop} (one of a group made with this handler's
     * factory) now.
     *
     * @throws IllegalArgumentException the loop is not an RDMA event loop, or was shut down
     */
    public static RdmaLoopStats stats(EventLoop loop) {
        RdmaIoHandler h = LOOPS.get(loop);
        if (h == null) {
            throw new IllegalArgumentException("RdmaIoHandler.stats: " + loop
                    + " is not a live event loop of RdmaIoHandler.newFactory() (pass a loop of the group, e.g."
                    + " channel.eventLoop())");
        }
        return h.loopStats();
    }

    private synchronized RdmaLoopStats loopStats() {
        SharedReceives p = shared;
        SharedSends q = sends;
        return new RdmaLoopStats(
                reservations,
                creditsReserved,
                reservedBytes,
                config.maxReceiveBytes(),
                p == null ? 0 : p.registeredBytes(),
                p == null ? 0 : p.posted(),
                q == null ? 0 : q.registeredBytes(),
                q == null ? 0 : q.bytesInUse());
    }

    /**
     * A connection's stream on this loop, its receive memory reserved (any thread): the loop's
     * shared receive queue's buffers, or its own; refused when the loop's reservations would pass
     * {@link RdmaTransportConfig#maxReceiveBytes()}.
     *
     * @throws ReceiveLimitException the cap would be passed
     */
    RdmaStream newStream(
            Context ctx,
            int bufferSize,
            int receiveBuffers,
            int sendBuffers,
            io.netty.buffer.ByteBufAllocator alloc,
            boolean zeroCopyReads)
            throws ReceiveLimitException {
        CompletionChannel ch = completionChannel(ctx);
        ProtectionDomain pd = RdmaByteBufAllocator.domainFor(alloc, ctx);
        boolean share = config.shared();
        int credits = share ? config.sharedReceiveCredits() : receiveBuffers;
        SharedReceives pool = null;
        if (share) {
            try {
                pool = reserveShared(ctx, ch, alloc, credits);
            } catch (ReceiveLimitException | RuntimeException e) {
                sharedMaybeIdle(); // a queue made for this connection alone goes again
                throw e;
            }
        } else {
            reserve((long) (credits + RdmaStream.SPARE_RECEIVES) * bufferSize, credits, true);
        }
        SharedSends sendPool = pool == null ? null : sends;
        SharedSends.Account account = sendPool == null ? null : sendPool.join(null);
        try {
            if (pool != null) {
                pool.cover(); // registers outside the locks the loop's reads take
            }
            if (sendPool != null) {
                sendPool.cover(); // a send buffer for this connection, registered on this thread
            }
            RdmaStream s = new RdmaStream(ctx, ch, bufferSize, credits, sendBuffers, pd, pool, this);
            s.zeroCopyReads(zeroCopyReads);
            s.sharedSends(sendPool, account);
            return s;
        } catch (RuntimeException e) {
            if (account != null) {
                sendPool.leave(account);
            }
            unreserve(credits, pool == null ? bufferSize : pool.bufferSize, pool);
            throw e;
        }
    }

    private synchronized void reserve(long bytes, int credits, boolean depthLeft) throws ReceiveLimitException {
        long cap = config.maxReceiveBytes();
        if (reservedBytes + bytes > cap || !depthLeft) {
            throw new ReceiveLimitException("a connection on this event loop is refused: its " + bytes
                    + " bytes of receive buffers would bring the loop's " + reservedBytes + " bytes reserved for "
                    + reservations + " connections past RdmaTransportConfig.maxReceiveBytes " + cap
                    + (depthLeft
                            ? ""
                            : ", or past the depth of the loop's shared receive queue (" + sharedDepth() + " buffers)")
                    + "; raise the cap (withMaxReceiveBytes), spread connections over more loops, or grant fewer"
                    + " credits per connection");
        }
        reservedBytes += bytes;
        reservations++;
        creditsReserved += credits;
    }

    private synchronized SharedReceives reserveShared(
            Context ctx, CompletionChannel ch, io.netty.buffer.ByteBufAllocator alloc, int credits)
            throws ReceiveLimitException {
        SharedReceives p = shared;
        if (p == null) {
            Runnable hold = RdmaByteBufAllocator.holdDomain(alloc, ctx); // the pool keeps the domain it is made on
            p = new SharedReceives(
                    ctx,
                    ch,
                    hold == null ? null : RdmaByteBufAllocator.domainFor(alloc, ctx),
                    hold,
                    config.sharedBufferSize(),
                    config.maxReceiveBytes());
            shared = p;
            sends = config.sharedSends() ? newSharedSends(p) : null;
        }
        int n = credits + RdmaStream.SPARE_RECEIVES;
        long bytes = (long) n * p.bufferSize;
        if (reservedBytes + bytes <= config.maxReceiveBytes()) {
            reserve(bytes, credits, p.claim(n));
        } else {
            reserve(bytes, credits, true); // refused: past the cap
        }
        return p;
    }

    /** The loop's shared send buffers, registered on the shared receive queue's protection domain. */
    private SharedSends newSharedSends(SharedReceives p) {
        return new SharedSends(
                config.sharedBufferSize(),
                config.sharedSendBytes(),
                bytes -> {
                    org.verbs4j.MemoryRegion mr = p.pd.allocateMemoryRegion(bytes, org.verbs4j.Access.LOCAL_WRITE);
                    return new SharedSends.Chunk(
                            mr,
                            io.netty.buffer.Unpooled.wrappedBuffer(mr.segment().asByteBuffer()),
                            bytes,
                            mr::close);
                },
                executor);
    }

    private long sharedDepth() {
        SharedReceives p = shared;
        return p == null ? 0 : p.maxBuffers;
    }

    /** The stream gives its reservation back (any thread). */
    void unreserve(RdmaStream s) {
        unreserve(s.receiveBuffers, s.recvSize, s.shared);
    }

    private void unreserve(int credits, int bufferSize, SharedReceives pool) {
        synchronized (this) {
            reservedBytes -= (long) (credits + RdmaStream.SPARE_RECEIVES) * bufferSize;
            reservations--;
            creditsReserved -= credits;
            if (pool != null) {
                pool.unreserve(credits + RdmaStream.SPARE_RECEIVES);
            }
        }
        sharedMaybeIdle();
    }

    /**
     * After a reservation went, whatever way (a connection closed, a connect failed or was
     * refused): closes the shared receive queue (and, once the loop is gone, its completion
     * channel) if no reservation is left: on the loop thread, or here when the loop is gone.
     */
    private void sharedMaybeIdle() {
        boolean gone;
        synchronized (this) {
            if (reservations > 0 || (shared == null && !destroyed)) {
                return;
            }
            gone = destroyed;
        }
        if (gone) {
            releaseAfterDestroy();
        } else if (executor.isExecutorThread(Thread.currentThread())) {
            closeSharedIfIdle();
        } else {
            try {
                executor.execute(this::closeSharedIfIdle);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                synchronized (this) {
                    gone = destroyed;
                }
                if (gone) { // else destroy() is yet to run, and finds the loop idle
                    releaseAfterDestroy();
                }
            }
        }
    }

    /** Any thread, once the loop is destroyed: the shared queue and the completion channel go with the last reservation. */
    private void releaseAfterDestroy() {
        SharedReceives p;
        SharedSends q;
        CompletionChannel ch;
        synchronized (this) {
            if (!destroyed || reservations > 0) {
                return;
            }
            p = shared;
            shared = null;
            q = sends;
            sends = null;
            ch = channel; // no reservation left: no stream's queue is left on it either
            channel = null;
        }
        if (q != null) {
            q.close(); // before the domain goes with the receive queue
        }
        if (p != null) {
            p.close();
        }
        if (ch != null) {
            try {
                ch.close();
            } catch (RuntimeException e) {
                LOG.warn("verbs4j-netty: closing the loop's completion channel failed: {}", e.toString());
            }
        }
    }

    /**
     * Loop thread, after a connection on the shared receive queue was disconnected (its queue
     * pair takes no more buffers): reaps what it received, so that nothing of it is left in the
     * loop's queue once its queue pair is gone.
     */
    void drainShared() {
        SharedReceives p = shared;
        if (p != null) {
            try {
                p.poll(false, true); // the other channels it reaped frames for are told (unless a poll tells them)
            } catch (RuntimeException e) {
                LOG.warn("verbs4j-netty: reaping the shared receive queue failed: {}", e.toString());
            }
        }
    }

    /**
     * Loop thread, after a connection on the shared receive queue was disconnected: waits (at most
     * {@value #LAST_WQE_WAIT_MS} ms) for {@code IBV_EVENT_QP_LAST_WQE_REACHED} of its queue pair,
     * moved to ERR: only then are all of its receive completions in the loop's queue, to be reaped
     * (and their buffers reposted) before the queue pair is destroyed, which would discard them.
     * A loop whose device let the bound pass {@value #LAST_WQE_MISSES_TO_STOP} times in a row before
     * it ever sent one is not waited on again (logged at INFO); nor is a device that reported a
     * fatal error (it sends nothing more).
     */
    void awaitLastWqe(QueuePair qp) {
        if (qp == null
                || !qp.isOpen()
                || qp.state() != QueuePairState.ERR
                || lastWqeNeverSent
                || qp.protectionDomain().context().deviceFailure().isPresent()) {
            return;
        }
        long t0 = System.nanoTime();
        while (!qp.lastWqeReached()) {
            if (System.nanoTime() - t0 > TimeUnit.MILLISECONDS.toNanos(LAST_WQE_WAIT_MS)) {
                LAST_WQE_MISSED.incrementAndGet();
                lastWqeNeverSent = !lastWqeSeen && ++lastWqeMissesInARow >= LAST_WQE_MISSES_TO_STOP;
                LOG.debug(
                        "verbs4j-netty: no IBV_EVENT_QP_LAST_WQE_REACHED for {} within {} ms; destroying it anyway",
                        qp,
                        LAST_WQE_WAIT_MS);
                if (lastWqeNeverSent) {
                    LOG.info(
                            "verbs4j-netty: {} sent no IBV_EVENT_QP_LAST_WQE_REACHED for {} queue pairs in a row:"
                                    + " this loop no longer waits for it before destroying a queue pair",
                            qp.protectionDomain().context().deviceName(),
                            LAST_WQE_MISSES_TO_STOP);
                }
                return;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(50_000);
        }
        lastWqeSeen = true;
        lastWqeMissesInARow = 0;
        LAST_WQE_ARRIVED.incrementAndGet();
        LAST_WQE_NANOS.addAndGet(System.nanoTime() - t0);
    }

    /** Loop thread, after a connection closed: the shared receive queue goes once no connection holds it. */
    void closeSharedIfIdle() {
        SharedReceives p;
        SharedSends q;
        synchronized (this) {
            p = shared;
            if (p == null || p.reserved() > 0 || destroyed) {
                return;
            }
            shared = null;
            q = sends;
            sends = null;
        }
        if (q != null) {
            q.close(); // before the domain goes with the receive queue
        }
        p.close();
    }

    @Override
    public int run(IoHandlerContext ctx) {
        if (!config.busyPoll() && ctx.canBlock()) {
            long nanos = ctx.delayNanos(System.nanoTime());
            long millis =
                    unboundedWait || nanos >= Long.MAX_VALUE / 2 ? -1 : TimeUnit.NANOSECONDS.toMillis(nanos + 999_999L);
            switch (waiter.await("RdmaIoHandler.run", channelFd, millis)) {
                case READABLE -> WAITS_READABLE.incrementAndGet();
                case WOKEN -> WAITS_WOKEN.incrementAndGet();
                case TIMED_OUT -> WAITS_TIMED_OUT.incrementAndGet();
            }
        }
        return config.busyPoll() ? pollAll() : reapEvents();
    }

    /** Hands every completion event now queued on the channel to its handle. */
    private int reapEvents() {
        CompletionChannel ch = channel;
        if (ch == null) {
            return 0;
        }
        int n = 0;
        CompletionQueue cq;
        while ((cq = waiter.nextEvent(ch)) != null) {
            RdmaIoHandle h = byQueue.get(cq);
            SharedReceives p = shared;
            if (p != null && cq == p.cq) {
                pollShared(p, true);
                n++;
                EVENTS.incrementAndGet();
            } else if (h != null) {
                h.completionsReady(true);
                n++;
                EVENTS.incrementAndGet();
            }
        }
        return n;
    }

    private int pollAll() {
        reapEvents(); // acknowledge events so the channel does not fill
        SharedReceives p = shared;
        if (p != null) {
            pollShared(p, false);
        }
        scratch.clear();
        scratch.addAll(byQueue.values());
        for (RdmaIoHandle h : scratch) {
            h.completionsReady(false);
        }
        return scratch.size();
    }

    private static void pollShared(SharedReceives p, boolean arm) {
        try {
            p.poll(arm, true);
        } catch (RuntimeException e) {
            LOG.warn("verbs4j-netty: reaping the shared receive queue failed: {}", e.toString());
        }
    }

    @Override
    public void wakeup() {
        waiter.wake();
    }

    /**
     * The completion channel of this loop for {@code ctx}'s device, made at the first call; a
     * second device is refused (one loop, one device). Any thread.
     */
    synchronized CompletionChannel completionChannel(Context ctx) {
        if (destroyed) {
            throw new IllegalStateException("this event loop was shut down: connect on a loop of a live group");
        }
        if (channel == null) {
            context = ctx;
            channel = ctx.createCompletionChannel();
            channelFd = channel.fd();
            waiter.wake(); // the loop may be blocked without the fd
        } else if (context != ctx) {
            throw new IllegalStateException("this event loop serves " + context.deviceName() + ", not "
                    + ctx.deviceName() + ": use one event loop group per RDMA device");
        }
        return channel;
    }

    /** From now on, events of {@code cq} go to {@code h}; reaps what came before. Loop thread. */
    void attach(CompletionQueue cq, RdmaIoHandle h) {
        byQueue.put(cq, h);
        h.completionsReady(true);
    }

    /** No more events of {@code cq} (it is about to close). Loop thread. */
    void detach(CompletionQueue cq) {
        byQueue.remove(cq);
    }

    /**
     * Registers a channel's handle with its event loop (the channel's {@code doRegister}): then
     * {@code registered} gets the registration and the promise succeeds, or the promise fails.
     */
    static void register(
            io.netty.channel.Channel channel,
            RdmaIoHandle handle,
            io.netty.channel.ChannelPromise promise,
            java.util.function.BiConsumer<IoRegistration, RdmaIoHandler> registered) {
        ((io.netty.channel.IoEventLoop) channel.eventLoop()).register(handle).addListener(f -> {
            if (f.isSuccess()) {
                IoRegistration r = (IoRegistration) f.getNow(); // the loop's wrapper of a Registration
                registered.accept(r, r.attachment());
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
            }
        });
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        RdmaIoHandle h = (RdmaIoHandle) handle;
        handles.add(h);
        h.registered();
        return new Registration(h);
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RdmaIoHandle.class.isAssignableFrom(handleType);
    }

    @Override
    public void prepareToDestroy() {
        for (RdmaIoHandle h : new ArrayList<>(handles)) {
            try {
                h.close();
            } catch (Exception e) {
                LOG.warn("verbs4j-netty: closing a channel at shutdown failed: {}", e.toString());
            }
        }
        handles.clear();
    }

    @Override
    public void destroy() {
        LOOPS.remove(executor);
        synchronized (this) {
            destroyed =
                    true; // a connect still in flight releases the queue and the channel when it gives its reservation
            // back
        }
        releaseAfterDestroy();
        waiter.close();
    }

    /** One handle's registration; cancelled on the loop thread (Netty deregisters there). */
    private final class Registration implements IoRegistration {
        private final RdmaIoHandle handle;
        private boolean valid = true;

        Registration(RdmaIoHandle handle) {
            this.handle = handle;
        }

        /** The handler this registration belongs to (the channel finds its loop's handler so). */
        @SuppressWarnings("unchecked")
        @Override
        public <T> T attachment() {
            return (T) RdmaIoHandler.this;
        }

        @Override
        public long submit(IoOps ops) {
            return 0;
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            handles.remove(handle);
            handle.unregistered();
            return true;
        }
    }
}
