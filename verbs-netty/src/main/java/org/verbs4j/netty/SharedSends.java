package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import org.verbs4j.MemoryRegion;

/**
 * The send buffers of one event loop's connections on its shared receive queue
 * ({@link RdmaTransportConfig#sharedSendBytes()}): buffers of {@link #bufferSize} bytes sliced
 * from registered chunks of {@link #CHUNK}, at most {@link #maxBuffers}. A connection takes one
 * when it has stream bytes to copy into a frame, and gives it back when that frame's send
 * completed (or, at its close, once its queue pair is gone): a buffer is held only while the
 * device may read it, never while a connection waits for credits. Frames without bytes (credit
 * returns, probes, their answers, the end of stream) take none, so they never wait here.
 *
 * <p>Each connection ({@link Account}) is sure of one buffer while the loop has no more connections
 * than buffers: one is registered for it when it joins, up to the cap or a failed registration;
 * past that, connections share the buffers registered. A connection holding none may take the last
 * free buffer, while one holding some takes a further one only if as many stay free as connections
 * hold none. A connection that finds none waits (its writes stay in the outbound buffer, which turns
 * unwritable at its high water mark) and is told, on the loop thread, once a buffer came back or a
 * chunk was added. Progress is certain: every buffer held is in a posted send, which completes
 * (or is flushed) without the peer's application.
 *
 * <p>Chunks are registered outside this object's lock: for a joining connection's buffer on its
 * connecting thread ({@link #cover}), past that on the loop thread when its connections need more
 * (once per chunk, never past the cap). A failed registration, on either thread, stops the growth
 * for the pool's life, with one warning, once a buffer is registered; before, the join is refused.
 * Takes run on the loop thread; gives, joins and leaves on any.
 */
final class SharedSends {
    /** Buffers per registered chunk. */
    static final int CHUNK = 64;

    /** Registers one chunk of {@code bytes} (no lock held). */
    interface Registrar {
        Chunk register(long bytes);
    }

    /** A registered chunk: its region (null where a test stands in), its bytes, and how it is deregistered. */
    record Chunk(MemoryRegion region, ByteBuf view, long length, Runnable close) {}

    /** One connection's share (the fields under the pool's lock). */
    static final class Account {
        /** On the loop thread: a buffer may be free now (the connection writes again); set before its first take. */
        Runnable wake;

        int held;
        boolean waiting;

        Account(Runnable wake) {
            this.wake = wake;
        }
    }

    final int bufferSize;
    final int maxBuffers;
    private final Registrar registrar;
    private final Executor loop;
    private final List<Chunk> chunks = new ArrayList<>();
    private final List<Account> waiting = new ArrayList<>(), waking = new ArrayList<>();
    private final Runnable wakeTask = this::wakeWaiting;
    private int[] free = new int[CHUNK];
    private int freeCount, sliced, members, idle, inUse, limit;
    private long registered;
    private boolean closed, growing, wakeScheduled;

    /** A pool of buffers of {@code bufferSize} bytes, at most {@code maxBytes} (at least one buffer). */
    SharedSends(int bufferSize, long maxBytes, Registrar registrar, Executor loop) {
        this.bufferSize = bufferSize;
        this.maxBuffers = (int) Math.max(1, Math.min(maxBytes / bufferSize, Integer.MAX_VALUE / 2));
        this.limit = maxBuffers;
        this.registrar = registrar;
        this.loop = loop;
    }

    /** A connection joins (any thread); {@link #cover} then registers its buffer. */
    synchronized Account join(Runnable wake) {
        members++;
        idle++;
        return new Account(wake);
    }

    /**
     * Registers chunks until there is a buffer for each connection (up to the cap, or until a
     * registration failed): a connecting thread, before its connection may send; waits while the
     * loop thread registers one.
     *
     * @throws RuntimeException no buffer is registered and none could be (the connection is refused)
     */
    void cover() {
        while (true) {
            int n;
            synchronized (this) {
                while (growing && !closed) {
                    try {
                        wait(100); // the loop thread's registration; it notifies
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while the loop registered send buffers", e);
                    }
                }
                if (closed || sliced >= Math.min(members, limit)) {
                    return;
                }
                n = startGrowth();
            }
            try {
                grow(n);
            } catch (RuntimeException e) {
                if (!stopGrowth(n, e, false)) {
                    throw e; // none registered: the connection is refused (the next join tries again)
                }
            }
        }
    }

    /**
     * A registration of {@code n} buffers failed: no further growth, the buffers registered serve on
     * (warned once); where none is, growth stops only if {@code evenIfNone}. Whether any is registered.
     */
    private boolean stopGrowth(int n, RuntimeException e, boolean evenIfNone) {
        int s;
        synchronized (this) {
            s = sliced;
            if (s == 0 && !evenIfNone) {
                return false;
            }
            limit = s; // no registration is tried again, so this warns once
        }
        if (s > 0) {
            RdmaIoHandler.LOG.warn(
                    "verbs4j-netty: registering {} more send buffers for the loop failed ({}); its connections"
                            + " share the {} registered (raise the memlock limit, or lower sharedSendBytes)",
                    n,
                    e.toString(),
                    s);
        }
        return s > 0;
    }

    /**
     * Loop thread: a free buffer for {@code a}, or -1: none may be taken now, and {@code a} is told
     * when one may ({@link Account#wake}). Registers a chunk first when the pool may grow.
     */
    int take(Account a) {
        while (true) {
            int n;
            synchronized (this) {
                if (closed) {
                    return -1;
                }
                boolean first = a.held == 0;
                if (freeCount > 0 && (first || freeCount > idle)) {
                    idle -= first ? 1 : 0;
                    a.held++;
                    inUse++;
                    return free[--freeCount];
                }
                if (growing || sliced >= limit) {
                    if (!a.waiting) {
                        a.waiting = true;
                        waiting.add(a);
                    }
                    return -1;
                }
                n = startGrowth();
            }
            try {
                grow(n);
            } catch (RuntimeException e) {
                stopGrowth(n, e, true);
            }
        }
    }

    /** Buffer {@code b} of {@code a} goes back (its send completed, or its queue pair is gone): any thread. */
    synchronized void give(Account a, int b) {
        if (closed) {
            return;
        }
        free[freeCount++] = b;
        inUse--;
        if (--a.held == 0) {
            idle++;
        }
        wakeIfWaiting();
    }

    /** {@code a} leaves, holding no buffer (any thread). */
    synchronized void leave(Account a) {
        members--;
        if (a.held == 0) {
            idle--;
        }
        if (a.waiting) {
            a.waiting = false;
            waiting.remove(a);
        }
    }

    /** Under the lock: claims the next registration, of {@code n} buffers. */
    private int startGrowth() {
        growing = true;
        return Math.min(CHUNK, limit - sliced);
    }

    /** Registers a chunk of {@code n} buffers outside the lock, then publishes it (or drops it if closed). */
    private void grow(int n) {
        Chunk c = null;
        boolean drop;
        try {
            c = registrar.register((long) n * bufferSize);
        } finally {
            synchronized (this) {
                growing = false;
                notifyAll();
                drop = closed;
                if (c != null && !drop) {
                    addChunk(c, n);
                }
            }
        }
        if (c != null && drop) {
            c.close().run();
        }
    }

    private void addChunk(Chunk c, int n) {
        int first = sliced;
        if (free.length < sliced + n) {
            free = Arrays.copyOf(free, Math.max(sliced + n, 2 * free.length));
        }
        for (int i = n - 1; i >= 0; i--) {
            free[freeCount++] = first + i;
        }
        chunks.add(c);
        sliced += n;
        registered += c.length();
        RdmaStats.REGISTERED.addAndGet(c.length());
        RdmaStats.SHARED_SEND_REGISTERED.addAndGet(c.length());
        wakeIfWaiting();
    }

    private void wakeIfWaiting() {
        if (waiting.isEmpty() || wakeScheduled) {
            return;
        }
        wakeScheduled = true;
        try {
            loop.execute(wakeTask);
        } catch (RejectedExecutionException e) {
            wakeScheduled = false; // the loop is shutting down: its channels close
        }
    }

    /** Loop thread: tells each waiting connection that a buffer may be free. */
    private void wakeWaiting() {
        synchronized (this) {
            wakeScheduled = false;
            waking.addAll(waiting);
            for (Account a : waiting) {
                a.waiting = false;
            }
            waiting.clear();
        }
        try {
            for (int i = 0; i < waking.size(); i++) {
                try {
                    waking.get(i).wake.run();
                } catch (RuntimeException e) {
                    RdmaIoHandler.LOG.warn("verbs4j-netty: a channel failed on a free send buffer: {}", e.toString());
                }
            }
        } finally {
            waking.clear();
        }
    }

    /** The chunk that buffer {@code b} lies in. */
    synchronized Chunk chunk(int b) {
        return chunks.get(b / CHUNK);
    }

    /** Where buffer {@code b} starts in its chunk. */
    int offset(int b) {
        return (b % CHUNK) * bufferSize;
    }

    synchronized int sliced() {
        return sliced;
    }

    synchronized int free() {
        return freeCount;
    }

    /** Bytes registered for it now. */
    synchronized long registeredBytes() {
        return registered;
    }

    /** Bytes of the buffers connections hold now. */
    synchronized long bytesInUse() {
        return (long) inUse * bufferSize;
    }

    /** No connection left: deregisters the chunks (before the protection domain goes). */
    void close() {
        List<Chunk> gone;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            notifyAll();
            gone = new ArrayList<>(chunks);
            chunks.clear();
            RdmaStats.REGISTERED.addAndGet(-registered);
            RdmaStats.SHARED_SEND_REGISTERED.addAndGet(-registered);
            registered = 0;
            waiting.clear();
        }
        for (Chunk c : gone) {
            try {
                c.close().run();
            } catch (RuntimeException e) {
                RdmaIoHandler.LOG.warn("verbs4j-netty: deregistering a shared send chunk failed: {}", e.toString());
            }
        }
    }
}
