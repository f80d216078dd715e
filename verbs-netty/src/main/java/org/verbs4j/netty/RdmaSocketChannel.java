package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.ChannelOutputShutdownEvent;
import io.netty.channel.socket.ChannelOutputShutdownException;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.NotYetConnectedException;
import java.time.Duration;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.verbs4j.Context;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.cm.CmEvent;
import org.verbs4j.cm.ConnectionFailedException;
import org.verbs4j.cm.ConnectionRequest;
import org.verbs4j.cm.RdmaConnection;

/**
 * A byte-stream channel over one RDMA reliable connection, the {@link SocketChannel} of this
 * transport: a client made by {@code Bootstrap.channel(RdmaSocketChannel.class)} and connected
 * by IP address and port through rdma_cm, or a connection an {@link RdmaServerSocketChannel}
 * accepted. Bytes written are copied into registered send buffers (those of an {@link
 * RdmaByteBufAllocator} set as ALLOCATOR are posted where they lie) and sent as SEND_WITH_IMM
 * frames of at most {@link RdmaChannelOption#BUFFER_SIZE} bytes, only while the peer has granted
 * a credit (a receive buffer it posted); a write's promise completes when the frames carrying
 * its bytes completed at the peer, and fails if the connection goes down first. Bytes received
 * are copied out of the registered receive buffers into buffers of the channel's allocator and
 * the receive buffers reposted; with {@link RdmaChannelOption#ZERO_COPY_READS} a frame is handed
 * up in its receive buffer instead, reposted once released. Half-closure as over TCP: {@link
 * #shutdownOutput()} sends an end-of-stream frame after every byte flushed before it, and the
 * peer's input ends there ({@code ChannelInputShutdownEvent} with {@code ALLOW_HALF_CLOSURE},
 * else it closes); a peer that closes or disconnects ends the input the same way.
 *
 * <p>Owns its connection, queue pair, completion queue and registered buffers ({@link RdmaStream});
 * all are released when the channel closes. Like every Netty channel: any thread may call its
 * outbound operations, which run on its event loop.
 */
public final class RdmaSocketChannel extends AbstractChannel implements SocketChannel {
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);
    private static final int DEFAULT_CONNECT_TIMEOUT_MS = 30_000;

    private enum State {
        OPEN,
        CONNECTING,
        ACTIVE,
        CLOSED
    }

    private final RdmaSocketChannelConfig config = new RdmaSocketChannelConfig(this);
    private final OutboundFrames outbound = new OutboundFrames();
    private final Runnable deliverTask = this::deliver, probeTask = this::probe;
    private final ReceivedByteBuf.Returns readReturns = this::readReleased;
    private volatile State state = State.OPEN;
    private volatile RdmaConnection pending;
    private volatile InetSocketAddress local, remote;
    private ConnectionRequest request;
    private IoRegistration registration;
    private RdmaIoHandler handler;
    private RdmaConnection connection;
    private RdmaStream stream;
    private ChannelPromise connectPromise;
    private boolean readPending, deliverScheduled, probeScheduled;
    private int probeIntervalMillis;
    /** Set by the connection manager's thread: the peer disconnected (the loop learns it from a task). */
    private volatile boolean peerClosed;
    /**
     * Half-closure, on the loop: the input ended (the peer's end of stream, its disconnect or
     * {@link #shutdownInput()}); the output was shut down (end of stream queued or sent); the
     * end-of-stream frame went out; no frame can go any more (the peer disconnected).
     */
    private volatile boolean inputShutdown, outputShutdown;

    private boolean endSent, outputBroken;
    private ChannelPromise endPromise;

    /** An unconnected client channel (for {@code Bootstrap.channel}). */
    public RdmaSocketChannel() {
        super(null);
    }

    /** An accepted connection, not answered yet: it is accepted once registered with its loop. */
    RdmaSocketChannel(RdmaServerSocketChannel parent, ConnectionRequest request) {
        super(parent);
        this.request = request;
        this.remote = request.peerAddress();
        this.local = request.localAddress();
        this.state = State.CONNECTING;
    }

    @Override
    public ServerSocketChannel parent() {
        return (ServerSocketChannel) super.parent();
    }

    @Override
    public RdmaSocketChannelConfig config() {
        return config;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public boolean isOpen() {
        return state != State.CLOSED;
    }

    @Override
    public boolean isActive() {
        return state == State.ACTIVE;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return remote;
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaUnsafe();
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(RdmaUnsafe.class);
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        RdmaIoHandler.register(this, (RdmaUnsafe) unsafe(), promise, (r, h) -> {
            registration = r;
            handler = h;
            if (request != null) {
                startAccept(); // on a connecting thread: the answer comes back to this loop
            }
        });
    }

    @Override
    protected void doDeregister() {
        if (registration != null) {
            registration.cancel();
            registration = null;
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        local = (InetSocketAddress) localAddress; // the route to the peer picks the device; kept for localAddress()
    }

    @Override
    protected void doDisconnect() {
        doClose();
    }

    @Override
    protected void doClose() {
        State was = state;
        state = State.CLOSED;
        ChannelPromise p = connectPromise;
        if (p != null) {
            connectPromise = null;
            p.tryFailure(new ClosedChannelException());
        }
        ChannelPromise e = endPromise;
        if (e != null) {
            endPromise = null;
            e.tryFailure(new ClosedChannelException());
        }
        ConnectionRequest r = request;
        if (r != null) {
            request = null;
            r.close(); // rejects it unless an accept took it (that one finds the channel closed)
        }
        RdmaConnection c = connection != null ? connection : pending;
        if (stream != null && handler != null) {
            handler.detach(stream.cq);
        }
        boolean shared = stream != null && stream.shared != null && handler != null;
        if (c != null && shared) {
            c.disconnect(); // its queue pair takes no more of the loop's buffers: reap what it took
            handler.awaitLastWqe(c.queuePair());
            handler.drainShared();
        }
        if (c != null) {
            c.close(); // disconnects; the queue pair is gone after this
        }
        if (stream != null) {
            stream.release();
            stream = null;
        }
        if (shared) {
            handler.closeSharedIfIdle();
        }
        outbound.reset();
        if (was == State.ACTIVE) {
            RdmaStats.CONNECTIONS.decrementAndGet();
        }
    }

    // ---- connecting and accepting (blocking work on a connecting thread) -------------------------

    private void startConnect(InetSocketAddress to, ChannelPromise promise) {
        state = State.CONNECTING;
        connectPromise = promise;
        remote = to;
        int ms = config.getConnectTimeoutMillis();
        Duration timeout = Duration.ofMillis(ms > 0 ? ms : DEFAULT_CONNECT_TIMEOUT_MS);
        RdmaIoHandler h = handler;
        int size = config.bufferSize(), recvs = config.receiveBuffers(), sends = config.sendBuffers();
        ByteBufAllocator alloc = config.getAllocator();
        Connector.run(() -> {
            RdmaStream s = null;
            RdmaConnection c = null;
            try {
                Context ctx = Connector.deviceOf(Connector.routeTo(to));
                s = h.newStream(ctx, size, recvs, sends, alloc, config.zeroCopyReads());
                c = RdmaConnection.create(Connector.cm(), s.setup());
                pending = c;
                if (state == State.CLOSED) {
                    throw new ClosedChannelException();
                }
                c.connect(to, s.handshake().encode(), timeout);
                Handshake peer = Handshake.decode(c.peerPrivateData());
                handOver(c, s, peer);
            } catch (Throwable t) {
                release(c, s);
                Throwable cause = connectFailure(t, to, timeout);
                runOnLoop(() -> failConnect(cause), null, null);
            }
        });
    }

    private void startAccept() {
        ConnectionRequest r = request;
        RdmaIoHandler h = handler;
        int size = config.bufferSize(), recvs = config.receiveBuffers(), sends = config.sendBuffers();
        ByteBufAllocator alloc = config.getAllocator();
        int ms = config.getConnectTimeoutMillis();
        Duration timeout = Duration.ofMillis(ms > 0 ? ms : DEFAULT_CONNECT_TIMEOUT_MS);
        Connector.run(() -> {
            RdmaStream s = null;
            RdmaConnection c = null;
            try {
                Handshake peer;
                try {
                    peer = Handshake.decode(r.privateData());
                } catch (ProtocolViolationException e) {
                    r.reject(null);
                    throw e;
                }
                Context ctx = Connector.deviceOf(r.localAddress().getAddress());
                s = h.newStream(ctx, size, recvs, sends, alloc, config.zeroCopyReads());
                c = r.accept(s.setup(), s.handshake().encode(), timeout);
                handOver(c, s, peer);
            } catch (Throwable t) {
                release(c, s);
                runOnLoop(
                        () -> {
                            if (isOpen()) {
                                pipeline().fireExceptionCaught(t);
                                unsafe().close(unsafe().voidPromise());
                            }
                        },
                        null,
                        null);
            }
        });
    }

    /** Gives a connected connection to the loop; releases it if the loop is gone. */
    private void handOver(RdmaConnection c, RdmaStream s, Handshake peer) {
        runOnLoop(() -> connected(c, s, peer), c, s);
    }

    private void runOnLoop(Runnable task, RdmaConnection c, RdmaStream s) {
        try {
            eventLoop().execute(task);
        } catch (RejectedExecutionException e) {
            release(c, s);
        }
    }

    /**
     * After a failed or abandoned connect or accept: {@code c} (when there is one; a connection
     * whose connect or accept failed may already be closing in the background), then the stream's
     * buffers, once its queue pair is gone.
     */
    private static void release(RdmaConnection c, RdmaStream s) {
        if (c != null) {
            c.close();
        }
        if (s != null) {
            s.releaseWhenQueuePairGone();
        }
    }

    private static Throwable connectFailure(Throwable t, InetSocketAddress to, Duration timeout) {
        if (t instanceof VerbsTimeoutException) {
            ConnectTimeoutException e = new ConnectTimeoutException(
                    "connection timed out after " + timeout.toMillis() + " ms: " + to + " (" + t.getMessage() + ")");
            e.initCause(t);
            return e;
        }
        if (t instanceof ConnectionFailedException f) {
            String what = switch (f.reason()) {
                case NO_LISTENER -> "connection refused: nothing listens on " + to;
                case REJECTED -> "connection refused by " + to;
                default -> "connecting to " + to + " failed";
            };
            ConnectException e = new ConnectException(what + " (" + f.getMessage() + ")");
            e.initCause(f);
            return e;
        }
        return t;
    }

    /** On the loop: the connection is up. */
    private void connected(RdmaConnection c, RdmaStream s, Handshake peer) {
        if (state == State.CLOSED) {
            release(c, s);
            return;
        }
        connection = c;
        pending = null;
        request = null;
        stream = s;
        s.connected(peer);
        probeIntervalMillis = config.probeIntervalMillis();
        local = c.localAddress();
        remote = c.peerAddress();
        state = State.ACTIVE;
        RdmaStats.CONNECTIONS.incrementAndGet();
        RdmaStats.OPENED.incrementAndGet();
        c.onEvent(this::connectionEvent);
        s.handle((RdmaUnsafe) unsafe());
        handler.attach(s.cq, (RdmaUnsafe) unsafe());
        ChannelPromise p = connectPromise;
        connectPromise = null;
        boolean promiseSet = p == null || p.trySuccess();
        pipeline().fireChannelActive();
        if (isActive()) {
            ((RdmaUnsafe) unsafe()).resumeFlush(); // what an accepted channel's handlers wrote before
        }
        if (!promiseSet) {
            unsafe().close(unsafe().voidPromise());
        } else if (c.state().isDown()) {
            peerGone();
        }
    }

    private void failConnect(Throwable cause) {
        ChannelPromise p = connectPromise;
        connectPromise = null;
        if (p != null) {
            p.tryFailure(cause);
        }
        unsafe().close(unsafe().voidPromise()); // closeFuture completes; no channelInactive (never active)
    }

    /** A connection-manager event (on the library's event thread). */
    private void connectionEvent(RdmaConnection c, CmEvent e) {
        if (c.state().isDown()) {
            peerClosed = true;
            runOnLoop(this::peerGone, null, null);
        }
    }

    /**
     * On the loop: the peer disconnected; hand up what arrived before, then close, or (with
     * ALLOW_HALF_CLOSURE) end the input as its end of stream would and stay open: writes then fail
     * as writes to a closed TCP peer do (AUTO_CLOSE closes the channel, else its output shuts down).
     */
    private void peerGone() {
        if (state != State.ACTIVE || outputBroken) {
            return;
        }
        outputBroken = true;
        stream.down();
        try {
            stream.poll(false);
        } catch (IOException e) {
            // the flush of the posted work: the connection is down, as the peer said
        }
        long done = stream.completedBytes;
        stream.completedBytes = 0;
        ChannelOutboundBuffer in = unsafe().outboundBuffer();
        if (done > 0 && in != null) {
            outbound.completed(in, done); // writes that arrived before the peer left succeed
        }
        deliverAll();
        if (!isActive()) {
            return; // a handler closed it meanwhile
        }
        boolean halfClosed = config.isAllowHalfClosure();
        if (halfClosed || !config.isAutoClose()) {
            ((RdmaUnsafe) unsafe()).resumeFlush(); // pending writes fail now, as a write error
        }
        if (halfClosed && isActive()) {
            endInput();
            return;
        }
        unsafe().close(unsafe().voidPromise()); // pending writes fail: the peer is gone
    }

    /** The input ended: without ALLOW_HALF_CLOSURE the channel closes, else the pipeline hears it. */
    private void endInput() {
        if (inputShutdown && !config.isAllowHalfClosure()) {
            return;
        }
        boolean first = !inputShutdown;
        inputShutdown = true;
        if (!config.isAllowHalfClosure()) {
            unsafe().close(unsafe().voidPromise());
        } else if (first) {
            pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
            eventLoop().execute(() -> {
                if (isOpen()) {
                    pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
                }
            });
        }
    }

    // ---- the data path (event loop thread) -------------------------------------------------------

    /** Reaps the completion queue and acts on what it held. */
    private void completions(boolean arm) {
        RdmaStream s = stream;
        if (s == null || state != State.ACTIVE) {
            return;
        }
        try {
            s.poll(arm);
        } catch (IOException e) {
            afterCompletions(s);
            fail(e);
            return;
        }
        afterCompletions(s);
    }

    private void afterCompletions(RdmaStream s) {
        long done = s.completedBytes;
        if (done > 0) {
            s.completedBytes = 0;
            ChannelOutboundBuffer in = unsafe().outboundBuffer();
            if (in != null) {
                outbound.completed(in, done); // may run listeners, which may write or close
            }
        }
        if (inputShutdown) {
            discard(s);
        } else if (readPending) {
            deliver();
        }
        ((RdmaUnsafe) unsafe()).resumeFlush();
        sendEndIfDue();
        returnCredits();
        watchCredits();
        if (stream == s && s.inputEnded() && !inputShutdown && isActive()) {
            endInput();
        }
    }

    /**
     * Schedules a probe of the peer when writes wait for its credits and no send is in flight: were
     * the peer gone, nothing else would find out (see {@link RdmaStream#postProbe}).
     */
    private void watchCredits() {
        if (!probeScheduled && probeIntervalMillis > 0 && waitingForCredits()) {
            probeScheduled = true;
            eventLoop().schedule(probeTask, probeIntervalMillis, TimeUnit.MILLISECONDS);
        }
    }

    private boolean waitingForCredits() {
        RdmaStream s = stream;
        if (s == null || state != State.ACTIVE || !s.waitingForCredits()) {
            return false;
        }
        ChannelOutboundBuffer in = unsafe().outboundBuffer();
        return (in != null && !in.isEmpty()) || (outputShutdown && !endSent);
    }

    /**
     * Each probe interval while writes wait for the peer's credits: probes the peer once it
     * answered the last probe (or has not for {@link RdmaStream#ACK_WAIT_PROBES} intervals).
     */
    private void probe() {
        probeScheduled = false;
        if (!waitingForCredits()) {
            return;
        }
        long ackWait = TimeUnit.MILLISECONDS.toNanos((long) probeIntervalMillis * RdmaStream.ACK_WAIT_PROBES);
        if (stream.probeDue(System.nanoTime(), ackWait)) {
            try {
                stream.postProbe();
            } catch (IOException e) {
                fail(e);
                return;
            }
        }
        watchCredits();
    }

    /** Drops what arrived after the input was shut down, so that the peer's credits keep coming back. */
    private void discard(RdmaStream s) {
        try {
            s.discardReady();
        } catch (IOException e) {
            failLater(e);
        }
    }

    /** Posts the end-of-stream frame once the output is shut down and every flushed byte was posted. */
    private void sendEndIfDue() {
        RdmaStream s = stream;
        if (!outputShutdown || endSent || s == null || state != State.ACTIVE || !s.canSendData()) {
            return;
        }
        ChannelOutboundBuffer in = unsafe().outboundBuffer();
        if (in != null && !in.isEmpty() && !outbound.allPosted()) {
            return;
        }
        try {
            s.postEnd();
        } catch (IOException e) {
            failLater(e);
            return;
        }
        outputShutdownDone();
    }

    private void outputShutdownDone() {
        endSent = true;
        ChannelPromise p = endPromise;
        endPromise = null;
        if (p != null) {
            p.trySuccess();
        }
        pipeline().fireUserEventTriggered(ChannelOutputShutdownEvent.INSTANCE);
    }

    private void returnCredits() {
        RdmaStream s = stream;
        if (s != null && state == State.ACTIVE) {
            try {
                s.returnCreditsIfDue();
            } catch (IOException e) {
                failLater(e);
            }
        }
    }

    /**
     * On the loop: the connection broke ({@code e} says how): hands up what arrived before, tells
     * the pipeline (unless the peer simply went away), and closes; pending writes fail with {@code e}.
     */
    private void fail(IOException e) {
        if (state != State.ACTIVE) {
            return;
        }
        stream.down();
        // once the peer disconnected, a flushed completion or a refused post is only its consequence
        boolean quiet = connection.state().isDown()
                && !(e instanceof ProtocolViolationException)
                && !(e instanceof RdmaStream.CompletionFailedException f && !f.flushed);
        if (quiet && (config.isAllowHalfClosure() || !config.isAutoClose())) {
            peerGone();
            return;
        }
        deliverAll();
        if (!isOpen()) {
            return; // a handler closed it meanwhile
        }
        if (!quiet) {
            pipeline().fireExceptionCaught(e);
        }
        ((RdmaUnsafe) unsafe()).closeWith(e);
    }

    /**
     * {@link #fail} from a task: for a failure inside a write or a read, so that the pipeline is not
     * re-entered from its own call; nothing more is posted meanwhile.
     */
    private void failLater(IOException e) {
        RdmaStream s = stream;
        if (s != null) { // else a handler closed the channel meanwhile
            s.down();
            eventLoop().execute(() -> fail(e));
        }
    }

    /** Hands up every received byte, reading or not (the connection is ending; nothing is reposted). */
    private void deliverAll() {
        while (stream != null && stream.readyFrames() > 0 && isActive() && !inputShutdown) {
            readPending = true;
            deliver();
        }
    }

    @SuppressWarnings("deprecation") // RecvByteBufAllocator.Handle: what AbstractUnsafe hands out
    private void deliver() {
        deliverScheduled = false;
        RdmaStream s = stream;
        if (s != null && inputShutdown) {
            discard(s); // the input was shut down: nothing more is handed up
            return;
        }
        if (s == null || !readPending || s.readyFrames() == 0) {
            return;
        }
        RecvByteBufAllocator.Handle h = unsafe().recvBufAllocHandle();
        h.reset(config);
        ByteBufAllocator alloc = config.getAllocator();
        IOException failed = null;
        do {
            ByteBuf b = s.takeInPlace(alloc, readReturns); // zero-copy reads: the frame in its receive buffer
            if (b != null) {
                h.attemptedBytesRead(b.readableBytes());
            } else {
                // as a socket read: a buffer sized as the allocator guesses, filled from as many
                // frames as it holds (a frame larger than the buffer is handed up over several reads)
                b = h.allocate(alloc);
                h.attemptedBytesRead(b.writableBytes());
                try {
                    do {
                        s.takeReady(b);
                    } while (b.isWritable() && s.readyFrames() > 0);
                } catch (IOException e) {
                    failed = e; // what was copied is handed up, then the channel fails
                }
            }
            h.lastBytesRead(b.readableBytes());
            if (!b.isReadable()) {
                b.release(); // an allocator that gave no room: try again from a task
                break;
            }
            h.incMessagesRead(1);
            readPending = false;
            pipeline().fireChannelRead(b);
        } while (failed == null && stream == s && s.readyFrames() > 0 && h.continueReading());
        h.readComplete();
        pipeline().fireChannelReadComplete();
        if (failed != null) {
            failLater(failed);
            return;
        }
        if (config.isAutoRead() && isActive()) {
            readPending = true;
        }
        if (stream == s) {
            returnCredits();
            if (readPending && stream == s && s.readyFrames() > 0 && !deliverScheduled) {
                deliverScheduled = true;
                eventLoop().execute(deliverTask);
            }
            if (stream == s && s.inputEnded() && !inputShutdown && isActive()) {
                endInput();
            }
        }
    }

    /** A buffer handed up in place was released (any thread): its receive is reposted on the loop. */
    private void readReleased(RdmaStream s, int slot) {
        if (s.returnedIfOrphaned(slot)) {
            return; // the connection is gone: straight back to the loop's shared queue, from this thread
        }
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            repostReleased(s, slot);
            return;
        }
        try {
            loop.execute(() -> repostReleased(s, slot));
        } catch (RejectedExecutionException e) {
            s.returnedAfterClose(slot); // the loop is gone and with it the connection
        }
    }

    /** On the loop: reposts a released receive; the credit it owes may let writes and credits go. */
    private void repostReleased(RdmaStream s, int slot) {
        if (stream != s || state != State.ACTIVE) {
            s.returnedAfterClose(slot); // closed: a buffer of the loop's shared queue goes back to it
            return;
        }
        try {
            s.returned(slot);
        } catch (IOException e) {
            failLater(e);
            return;
        }
        ((RdmaUnsafe) unsafe()).resumeFlush();
        sendEndIfDue();
        returnCredits();
    }

    /** AUTO_READ turned off: no read pending; before registration (the bootstrap's options) at once. */
    void clearReadPending() {
        if (!isRegistered() || eventLoop().inEventLoop()) {
            readPending = false;
        } else {
            eventLoop().execute(() -> readPending = false);
        }
    }

    @Override
    protected void doBeginRead() {
        readPending = true;
        if (stream != null && stream.readyFrames() > 0 && !deliverScheduled) {
            deliverScheduled = true;
            eventLoop().execute(deliverTask);
        }
    }

    @Override
    protected Object filterOutboundMessage(Object msg) throws ChannelOutputShutdownException {
        if (outputShutdown) {
            throw new ChannelOutputShutdownException("RdmaSocketChannel.write: the output was shut down"
                    + " (shutdownOutput or a failed write); write before shutdownOutput(), or open a new channel");
        }
        if (msg instanceof ByteBuf) {
            return msg;
        }
        throw new UnsupportedOperationException("RdmaSocketChannel writes ByteBufs, not "
                + msg.getClass().getName() + " (file regions need a file descriptor: read the file into buffers)");
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws IOException {
        RdmaStream s = stream;
        if (s == null) {
            return;
        }
        if (outputBroken) {
            // as a write to a TCP peer that closed: AUTO_CLOSE closes the channel, else its output shuts down
            throw new IOException("RdmaSocketChannel.write to " + remote
                    + " failed: the peer closed the connection; close() this channel");
        }
        if (peerClosed) {
            return; // the loop is about to learn it (peerGone), which fails or hands back these writes
        }
        try {
            outbound.write(in, s);
        } catch (IOException e) {
            failLater(e);
            return;
        }
        sendEndIfDue();
        returnCredits();
        watchCredits();
    }

    @Override
    protected void doShutdownOutput() {
        // a write failed with AUTO_CLOSE off (AbstractUnsafe fails the writes and fires the event)
        outputShutdown = true;
        endSent = true; // no end-of-stream frame: the output is broken
        outbound.reset();
        ChannelPromise p = endPromise;
        endPromise = null;
        if (p != null) {
            p.tryFailure(new IOException("RdmaSocketChannel.shutdownOutput: a write to " + remote
                    + " failed before the end of stream went; close() this channel"));
        }
    }

    // ---- half-closure ----------------------------------------------------------------------------

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return isInputShutdown() && isOutputShutdown();
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    /**
     * Ends the input here: what arrived and what arrives later is dropped unread (its receive
     * buffers reposted, so the peer's writes still complete); with ALLOW_HALF_CLOSURE the pipeline
     * hears {@code ChannelInputShutdownEvent}, else the channel closes, as a TCP channel does once
     * its input ends.
     */
    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        onLoop(promise, "shutdownInput", () -> {
            if (!inputShutdown) {
                discard(stream);
                promise.trySuccess();
                endInput();
            } else {
                promise.trySuccess();
            }
        });
        return promise;
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    /**
     * Ends the output: every byte written before is flushed, and an end-of-stream frame follows the
     * last of them; the promise succeeds (and {@code ChannelOutputShutdownEvent} fires) once that
     * frame is posted. Writes after it fail with {@link ChannelOutputShutdownException}.
     */
    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        onLoop(promise, "shutdownOutput", () -> {
            if (outputShutdown) {
                if (endPromise != null) {
                    endPromise.addListener(f -> cascade(f, promise));
                } else {
                    promise.trySuccess();
                }
                return;
            }
            outputShutdown = true;
            if (outputBroken) {
                endPromise = promise;
                outbound.reset();
                outputShutdownDone();
                return;
            }
            endPromise = promise;
            unsafe().flush(); // what was written before goes before the end of stream
            sendEndIfDue();
        });
        return promise;
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        ChannelPromise output = newPromise();
        shutdownOutput(output);
        output.addListener(f -> {
            if (f.isSuccess()) {
                shutdownInput(promise);
            } else {
                cascade(f, promise);
                shutdownInput(); // the input ends all the same
            }
        });
        return promise;
    }

    private static void cascade(io.netty.util.concurrent.Future<?> f, ChannelPromise to) {
        if (f.isSuccess()) {
            to.trySuccess();
        } else {
            to.tryFailure(f.cause());
        }
    }

    /** Runs a shutdown on the loop once the channel is active; fails {@code promise} otherwise. */
    private void onLoop(ChannelPromise promise, String method, Runnable action) {
        if (!isRegistered()) {
            promise.tryFailure(notActive(method));
            return;
        }
        Runnable task = () -> {
            if (state != State.ACTIVE) {
                promise.tryFailure(notActive(method));
            } else {
                action.run();
            }
        };
        if (eventLoop().inEventLoop()) {
            task.run();
        } else {
            try {
                eventLoop().execute(task);
            } catch (RejectedExecutionException e) {
                promise.tryFailure(notActive(method));
            }
        }
    }

    private Exception notActive(String method) {
        if (state == State.CLOSED) {
            ClosedChannelException e = new ClosedChannelException();
            e.initCause(new IllegalStateException("RdmaSocketChannel." + method + ": the channel is closed"));
            return e;
        }
        return new NotYetConnectedException(); // what a TCP channel throws: the suite checks the type
    }

    @Override
    public String toString() {
        return "RdmaSocketChannel(" + local + " -> " + remote + ", " + state + ")";
    }

    /** The channel's unsafe, and its handle in the {@link RdmaIoHandler}. */
    private final class RdmaUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            if (!promise.setUncancellable() || !ensureOpen(promise)) {
                return;
            }
            if (state == State.ACTIVE) {
                promise.setFailure(new AlreadyConnectedException());
                return;
            }
            if (state == State.CONNECTING) {
                promise.setFailure(new ConnectionPendingException());
                return;
            }
            if (!(remoteAddress instanceof InetSocketAddress to)) {
                promise.setFailure(new IllegalArgumentException(
                        "RdmaSocketChannel connects to an InetSocketAddress, not " + remoteAddress));
                return;
            }
            if (localAddress != null) {
                doBind(localAddress);
            }
            startConnect(to, promise);
        }

        /** Closes the channel; flushed writes not completed fail with {@code cause}. */
        void closeWith(Throwable cause) {
            ClosedChannelException closed = new ClosedChannelException();
            closed.initCause(cause);
            close(voidPromise(), cause, closed);
        }

        void resumeFlush() {
            ChannelOutboundBuffer in = outboundBuffer();
            if (in != null && !in.isEmpty()) {
                flush0();
            }
        }

        /**
         * An accepted channel is registered (and its handlers initialized) before its accept
         * completed: writes flushed meanwhile wait for it, as they would on a TCP channel that
         * the kernel accepted already, instead of failing as not yet connected.
         */
        @Override
        protected void flush0() {
            if (state == State.CONNECTING && parent() != null) {
                return; // connected() flushes them
            }
            super.flush0();
        }

        @Override
        public void completionsReady(boolean arm) {
            completions(arm);
        }

        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            // completions arrive through completionsReady
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
