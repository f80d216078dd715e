package org.verbs4j.netty;

import io.netty.channel.AbstractServerChannel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.socket.ServerSocketChannel;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.verbs4j.VerbsException;
import org.verbs4j.cm.CmListener;
import org.verbs4j.cm.ConnectionRequest;

/**
 * A listening channel of this transport, the {@link ServerSocketChannel} of
 * {@code ServerBootstrap.channel(RdmaServerSocketChannel.class)}: bound to an IP address and
 * port through rdma_cm (an address of an RDMA-capable interface, or the wildcard), it reads each
 * incoming connection request as a child {@link RdmaSocketChannel}, which accepts the request
 * once registered with its own event loop (so that its completion queue belongs to that loop).
 * Requests beyond the backlog while the application does not read are rejected. Owns its
 * listener; closing the channel closes it and rejects the requests not read yet. Any thread may
 * call its outbound operations, which run on its event loop.
 */
public final class RdmaServerSocketChannel extends AbstractServerChannel implements ServerSocketChannel {
    /** Requests read per read call, as Netty's NIO server channel reads 16 at most. */
    private static final int MAX_ACCEPTS_PER_READ = 16;

    private final RdmaServerSocketChannelConfig config = new RdmaServerSocketChannelConfig(this);
    private final ConcurrentLinkedQueue<ConnectionRequest> requests = new ConcurrentLinkedQueue<>();
    private final AtomicInteger queued = new AtomicInteger();
    private final Runnable acceptTask = this::acceptQueued;
    private volatile CmListener listener;
    private volatile boolean open = true;
    private IoRegistration registration;
    private boolean readPending;

    /** An unbound server channel (for {@code ServerBootstrap.channel}). */
    public RdmaServerSocketChannel() {}

    @Override
    public RdmaServerSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public boolean isActive() {
        return open && listener != null;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    protected SocketAddress localAddress0() {
        CmListener l = listener;
        return l == null ? null : l.localAddress();
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new ServerUnsafe();
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(ServerUnsafe.class);
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        RdmaIoHandler.register(this, (ServerUnsafe) unsafe(), promise, (r, h) -> registration = r);
    }

    @Override
    protected void doDeregister() {
        if (registration != null) {
            registration.cancel();
            registration = null;
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) throws Exception {
        if (!(localAddress instanceof InetSocketAddress a)) {
            throw new IllegalArgumentException(
                    "RdmaServerSocketChannel binds to an InetSocketAddress, not " + localAddress);
        }
        CmListener l;
        try {
            l = CmListener.bind(Connector.cm(), a, config.getBacklog());
        } catch (VerbsException e) {
            java.net.BindException b = new java.net.BindException("binding " + a + " failed: " + e.getMessage()
                    + (a.getAddress().isLoopbackAddress()
                            ? "; no RDMA device serves " + a.getAddress().getHostAddress()
                                    + ": rdma_cm binds only to addresses of RDMA-capable interfaces"
                            : ""));
            b.initCause(e);
            throw b;
        }
        l.onRequest(this::requested);
        listener = l;
    }

    /** A connection request (on the library's event thread): queue it for the loop, or reject it. */
    private void requested(ConnectionRequest r) {
        if (!open || queued.incrementAndGet() > config.getBacklog()) {
            queued.decrementAndGet();
            r.close();
            return;
        }
        requests.add(r);
        try {
            eventLoop().execute(acceptTask);
        } catch (RejectedExecutionException e) {
            r.close();
        }
    }

    private void acceptQueued() {
        if (!readPending || !isActive()) {
            return;
        }
        int max = MAX_ACCEPTS_PER_READ;
        int n = 0;
        ConnectionRequest r;
        while (n < max && (r = requests.poll()) != null) {
            queued.decrementAndGet();
            n++;
            if (!config.isAutoRead()) {
                readPending = false;
            }
            pipeline().fireChannelRead(new RdmaSocketChannel(this, r));
        }
        if (n > 0) {
            pipeline().fireChannelReadComplete();
        }
        if (readPending && !requests.isEmpty()) {
            eventLoop().execute(acceptTask);
        }
    }

    @Override
    protected void doBeginRead() {
        readPending = true;
        if (!requests.isEmpty()) {
            eventLoop().execute(acceptTask);
        }
    }

    void clearReadPending() {
        readPending = false;
    }

    @Override
    protected void doClose() {
        open = false;
        CmListener l = listener;
        if (l != null) {
            l.close();
        }
        ConnectionRequest r;
        while ((r = requests.poll()) != null) {
            r.close();
        }
    }

    @Override
    public String toString() {
        return "RdmaServerSocketChannel(" + localAddress0() + (open ? ")" : ", closed)");
    }

    /** The server channel's unsafe, and its handle in the {@link RdmaIoHandler}. */
    private final class ServerUnsafe extends AbstractUnsafe implements RdmaIoHandle {
        @Override
        public void connect(SocketAddress remote, SocketAddress local, ChannelPromise promise) {
            promise.setFailure(new UnsupportedOperationException(
                    "a server channel does not connect: use an RdmaSocketChannel through a Bootstrap"));
        }

        @Override
        public void completionsReady(boolean arm) {
            // a listener has no completion queue
        }

        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            // requests arrive through the listener's callback
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
