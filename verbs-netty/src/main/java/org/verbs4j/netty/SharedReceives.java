package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.verbs4j.Access;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionQueue;
import org.verbs4j.CompletionStatus;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SharedReceiveQueue;
import org.verbs4j.VerbsException;
import org.verbs4j.WorkCompletions;

/**
 * The shared receive queue of one event loop ({@link RdmaTransportConfig#withSharedReceiveQueue}):
 * its buffers are sliced from registered chunks of {@link #CHUNK} buffers, registered as the
 * credits reserved by the loop's connections grow (never more than the cap), so that the buffers
 * posted always cover every credit granted. One completion queue of the loop takes every
 * receive; a completion is matched to its connection by its queue pair number. One receive
 * completion queue per loop, not per connection: a queue fed by a shared receive queue must have
 * room for all of that queue's receives, which per connection would cost the whole pool's size
 * in completion entries each.
 *
 * <p>Reservations and posts come from connecting threads and the loop thread (under this
 * object's lock); a chunk is registered outside that lock ({@link #cover}), so that the loop's
 * reads never wait on a connecting thread's registration; polling and {@link #close} run on the
 * loop thread only (or, once the loop is gone, on the thread that gave the last reservation back).
 *
 * <p>With zero-copy reads a frame is handed up in its buffer ({@link #hold}) and comes back when
 * released ({@link #giveBack}, any thread): reposted, or once the queue is closed only counted.
 * The chunks' memory lives in automatic arenas, so a buffer read after everything closed still
 * reads valid memory; a chunk with buffers held at {@link #close} stays registered (and the
 * protection domain held) until the last of them comes back; the queue lets go of every chunk's
 * memory at its close, so a buffer still held keeps only its own chunk's. Buffers held by connections already
 * gone ({@link #orphan}) count against the cap as reservations do, so that the buffers posted
 * still cover every credit granted.
 *
 * <p>It owns a hold on its protection domain for as long as it lives: its own, or one held on a
 * connection's allocator's ({@link RdmaByteBufAllocator#holdDomain}), released by {@link #close}
 * (or by the last buffer given back after it).
 */
final class SharedReceives {
    /** Buffers per registered chunk. */
    static final int CHUNK = 64;
    /** The most buffers one loop's queue holds (its depth, and its completion queue's: a few MiB of the kernel's memory). */
    static final int MAX_DEPTH = 8192;

    final int bufferSize;
    /** The most buffers it may slice: the cap over the buffer size, at most {@link #MAX_DEPTH} and the device's depths. */
    final int maxBuffers;

    final ProtectionDomain pd;
    final SharedReceiveQueue srq;
    final CompletionQueue cq;
    /** Lets the protection domain go (closes it, or drops the hold on it). */
    private final Runnable releasePd;
    /** One registration at a time, outside this object's lock. */
    private final Object growing = new Object();

    private final List<MemoryRegion> chunks = new ArrayList<>();
    private final List<ByteBuf> views = new ArrayList<>();
    private final List<ByteBuffer> bytes = new ArrayList<>();
    private final HeldReceives held;
    private final ReceiveWorkRequests recvs = new ReceiveWorkRequests(1, 1);
    private final WorkCompletions wcs = new WorkCompletions(32);
    private final QpTable<RdmaStream> streams = new QpTable<>();
    private final List<RdmaStream> touched = new ArrayList<>();
    private int sliced, reserved, registeredChunks;
    private long posted;
    private boolean closed, polling, pdReleased;

    /**
     * A queue on {@code pd} held until {@code releasePd} (the hold is released here if this fails),
     * or on a protection domain of its own when {@code pd} is null.
     */
    SharedReceives(
            Context ctx,
            CompletionChannel channel,
            ProtectionDomain pd,
            Runnable releasePd,
            int bufferSize,
            long maxBytes) {
        this.bufferSize = bufferSize;
        try {
            org.verbs4j.DeviceAttributes dev = ctx.queryDevice();
            this.maxBuffers =
                    (int) Math.min(Math.min(maxBytes / bufferSize, MAX_DEPTH), Math.min(dev.maxSrqWr(), dev.maxCqe()));
            this.pd = pd != null ? pd : ctx.allocateProtectionDomain();
            this.held = new HeldReceives((maxBuffers + CHUNK - 1) / CHUNK, CHUNK);
        } catch (RuntimeException e) {
            if (pd != null) {
                releasePd.run();
            }
            throw e;
        }
        this.releasePd = pd != null ? releasePd : this.pd::close;
        try {
            this.srq = this.pd.createSharedReceiveQueue(Math.max(maxBuffers, 1), 1);
            CompletionQueue q = null;
            try {
                q = ctx.createCompletionQueue(Math.max(maxBuffers, 1), channel, 0);
                q.requestNotify(false);
            } catch (RuntimeException e) {
                closeAll(e, q, srq);
                throw e;
            }
            this.cq = q;
        } catch (RuntimeException e) {
            this.releasePd.run();
            throw e;
        }
    }

    /** Buffers reserved by connections now. */
    synchronized int reserved() {
        return reserved;
    }

    /** Buffers registered (sliced) now. */
    synchronized int sliced() {
        return sliced;
    }

    /** Buffers handed up in place whose connection is gone, not given back yet. */
    synchronized int orphans() {
        return held.orphans();
    }

    /** Buffers posted and not yet completed. */
    synchronized long posted() {
        return posted;
    }

    /**
     * Reserves {@code n} buffers for one connection; false when that would pass {@link #maxBuffers}.
     * The buffers posted cover it only after {@link #cover}.
     */
    synchronized boolean claim(int n) {
        if (closed || reserved + held.orphans() + n > maxBuffers) {
            return false;
        }
        reserved += n;
        return true;
    }

    /**
     * Registers and posts chunks until the buffers posted cover every reservation (a connecting
     * thread, before its connection may use them). Each chunk is registered outside this object's
     * lock and published under it, so the loop's reads never wait on a registration.
     */
    void cover() {
        synchronized (growing) {
            while (true) {
                int buffers;
                synchronized (this) {
                    buffers = closed ? 0 : nextChunk(sliced, reserved + held.orphans(), maxBuffers);
                    if (buffers == 0) {
                        return;
                    }
                }
                MemoryRegion mr = // a buffer handed up keeps its chunk's memory alive
                        pd.register(Arena.ofAuto().allocate((long) buffers * bufferSize, 4096), Access.LOCAL_WRITE);
                synchronized (this) {
                    if (closed) {
                        mr.close();
                        return;
                    }
                    addChunk(mr, buffers);
                }
            }
        }
    }

    /**
     * Buffers of the next chunk to register when {@code sliced} are registered, {@code wanted}
     * reserved (orphans included) and at most {@code maxBuffers} may be: 0 when none is needed or
     * the cap is reached (a connection going orphans its held buffers before it unreserves, so
     * for a moment {@code wanted} may pass the cap), never a chunk of no buffers.
     */
    static int nextChunk(int sliced, int wanted, int maxBuffers) {
        return sliced >= Math.min(wanted, maxBuffers) ? 0 : Math.min(CHUNK, maxBuffers - sliced);
    }

    synchronized void unreserve(int n) {
        reserved -= n;
    }

    private void addChunk(MemoryRegion mr, int buffers) {
        int first = chunks.size() * CHUNK; // slot s lies in chunk s / CHUNK; only the last chunk may be short
        RdmaStats.REGISTERED.addAndGet(mr.length());
        chunks.add(mr);
        registeredChunks++;
        bytes.add(mr.segment().asByteBuffer());
        views.add(Unpooled.wrappedBuffer(bytes.getLast()));
        for (int i = 0; i < buffers; i++) {
            postLocked(first + i);
        }
        sliced += buffers; // only once all are posted: a reservation is never counted as covered by fewer
    }

    /** Closes each of {@code resources} that exists, a failure added to {@code cause}. */
    private static void closeAll(RuntimeException cause, AutoCloseable... resources) {
        for (AutoCloseable r : resources) {
            if (r != null) {
                try {
                    r.close();
                } catch (Exception e) {
                    cause.addSuppressed(e);
                }
            }
        }
    }

    /** The bytes of buffer {@code slot}'s chunk (slot {@code s} at {@code (s % CHUNK) × bufferSize}); null once closed. */
    synchronized ByteBuf view(int slot) {
        return views.get(slot / CHUNK);
    }

    /**
     * Hands buffer {@code slot} up in place: its first {@code length} bytes, which stay valid for as
     * long as the view is reachable; {@link #giveBack} once released.
     */
    synchronized ByteBuffer hold(int slot, int length) {
        held.hold(slot);
        return bytes.get(slot / CHUNK).slice(slot % CHUNK * bufferSize, length);
    }

    /** {@code n} buffers held in place belonged to a connection now gone: they stay reserved until given back. */
    synchronized void orphan(int n) {
        held.orphan(n);
    }

    /**
     * A buffer {@link #hold} handed up was released (any thread; {@code orphan}: its connection is
     * gone): reposted, or once closed counted back, its chunk deregistered with the last.
     *
     * @throws IOException the repost failed
     */
    synchronized void giveBack(int slot, boolean orphan) throws IOException {
        int c = held.giveBack(slot, orphan);
        if (c == HeldReceives.REPOST) {
            repost(slot);
        } else if (c != HeldReceives.KEEP) {
            deregister(c);
        }
    }

    /** Posts buffer {@code slot} again (its bytes were handed up); nothing once closed. */
    synchronized void repost(int slot) throws IOException {
        if (closed) {
            return;
        }
        try {
            postLocked(slot);
        } catch (VerbsException e) {
            throw new IOException("reposting a buffer of the shared receive queue failed: " + e.getMessage(), e);
        }
    }

    private void postLocked(int slot) {
        srq.postRecv(
                recvs.clear().add(slot).sge(chunks.get(slot / CHUNK), (long) (slot % CHUNK) * bufferSize, bufferSize));
        posted++;
        RdmaStats.POSTED.incrementAndGet();
        RdmaStats.SHARED_POSTED.incrementAndGet();
    }

    /** From now on completions of queue pair {@code qpn} go to {@code s} (any thread). */
    synchronized void register(int qpn, RdmaStream s) {
        streams.put(qpn, s);
    }

    synchronized void unregister(int qpn) {
        streams.remove(qpn);
    }

    /**
     * Loop thread: reaps every receive completion and hands each to its connection (one of a
     * connection already gone is reposted), then, unless {@code notify} is false or a poll is
     * already handing them over, tells each connection that received something.
     */
    void poll(boolean arm, boolean notify) throws VerbsException {
        drain();
        if (arm) {
            cq.requestNotify(false);
            drain();
        }
        if (!notify || polling) {
            return;
        }
        polling = true;
        try {
            for (int i = 0; i < touched.size(); i++) { // a channel told may close and reap more: the list grows
                try {
                    touched.get(i).sharedReceived();
                } catch (RuntimeException e) {
                    RdmaIoHandler.LOG.warn("verbs4j-netty: a channel failed on frames it received: {}", e.toString());
                }
            }
        } finally {
            touched.clear();
            polling = false;
        }
    }

    private void drain() {
        int n;
        while ((n = cq.poll(wcs)) > 0) {
            synchronized (this) {
                for (int i = 0; i < n; i++) {
                    complete(i);
                }
            }
        }
    }

    private void complete(int i) {
        int slot = (int) wcs.wrId(i);
        posted--;
        RdmaStats.POSTED.decrementAndGet();
        RdmaStats.SHARED_POSTED.decrementAndGet();
        RdmaStream s = streams.get(wcs.qpNumber(i));
        if (!wcs.isSuccess(i) && wcs.status(i) == CompletionStatus.WR_FLUSH_ERR) {
            repostQuietly(slot); // flushed, not filled: the buffer is fine
            return;
        }
        if (s == null) {
            repostQuietly(slot); // a connection already gone: its frame is dropped, the buffer kept
            return;
        }
        if (s.arrivedShared(slot, wcs, i)) {
            touched.add(s);
        }
    }

    private void repostQuietly(int slot) {
        try {
            repost(slot);
        } catch (IOException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: {}", e.getMessage());
        }
    }

    /**
     * Loop thread (or any once the loop is gone), no reservation left: destroys the queues,
     * deregisters the chunks (those with buffers still held in place when the last comes back)
     * and lets the protection domain go once none is left.
     */
    synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        held.close();
        RdmaStats.POSTED.addAndGet(-posted);
        RdmaStats.SHARED_POSTED.addAndGet(-posted);
        posted = 0;
        try {
            srq.close();
            cq.close();
        } catch (RuntimeException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: closing the loop's shared receive queue failed: {}", e.toString());
        }
        recvs.close();
        wcs.close();
        for (int c = 0; c < chunks.size(); c++) {
            views.set(c, null); // nothing reads a chunk once closed: a buffer held keeps its own bytes alive
            bytes.set(c, null);
            if (held.heldIn(c) == 0) {
                deregister(c);
            }
        }
        releasePdIfDone();
    }

    /** Deregisters chunk {@code c} (closed, none of its buffers held), and lets the domain go after the last. */
    private void deregister(int c) {
        MemoryRegion mr = chunks.get(c);
        if (mr == null) {
            return;
        }
        chunks.set(c, null);
        registeredChunks--;
        RdmaStats.REGISTERED.addAndGet(-mr.length());
        try {
            mr.close();
        } catch (RuntimeException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: deregistering a shared receive chunk failed: {}", e.toString());
        }
        releasePdIfDone();
    }

    private void releasePdIfDone() {
        if (!closed || registeredChunks > 0 || pdReleased) {
            return;
        }
        pdReleased = true;
        try {
            releasePd.run();
        } catch (RuntimeException e) {
            RdmaIoHandler.LOG.warn("verbs4j-netty: closing the shared receive domain failed: {}", e.toString());
        }
    }

    /** Bytes registered for it now. */
    synchronized long registeredBytes() {
        long b = 0;
        for (MemoryRegion mr : chunks) {
            b += mr == null ? 0 : mr.length();
        }
        return b;
    }
}
