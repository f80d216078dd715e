package org.verbs4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * The transport a proof test of this module runs over: this module's RDMA transport (the default),
 * or Netty's NIO transport over TCP, which validates a harness where no RDMA device is and is the
 * baseline the benchmark compares with. The system property {@value #PROPERTY} ({@code rdma} or
 * {@code nio}) chooses.
 *
 * <p>The RDMA classes are looked up by name, so that the harnesses build and run over NIO with or
 * without the transport on the class path; over RDMA a missing class fails the test.
 */
public enum TestTransport {
    /** This module's transport: {@code RdmaIoHandler}, {@code RdmaServerSocketChannel}, {@code RdmaSocketChannel}. */
    RDMA,
    /** Netty's NIO transport over TCP. */
    NIO;

    /** System property naming the transport: {@code rdma} (default) or {@code nio}. */
    public static final String PROPERTY = "verbs4j.netty.transport";

    /** The transport chosen by {@value #PROPERTY}. */
    public static TestTransport current() {
        String v = System.getProperty(PROPERTY, "rdma");
        return switch (v) {
            case "rdma" -> RDMA;
            case "nio" -> NIO;
            default ->
                throw new IllegalArgumentException("-D" + PROPERTY + "=" + v + ": not a transport; use rdma or nio");
        };
    }

    /** The factory of this transport's I/O handlers. */
    public IoHandlerFactory ioHandlerFactory() {
        if (this == NIO) {
            return NioIoHandler.newFactory();
        }
        try {
            return (IoHandlerFactory)
                    rdmaClass("RdmaIoHandler").getMethod("newFactory").invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("RdmaIoHandler.newFactory() failed: " + e, e);
        }
    }

    /** A group of {@code threads} event loops of this transport, on daemon threads named after {@code name}. */
    public EventLoopGroup newGroup(int threads, String name) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(name, true), ioHandlerFactory());
    }

    /** The client channel class. */
    @SuppressWarnings("unchecked")
    public Class<? extends Channel> channelClass() {
        return this == NIO ? NioSocketChannel.class : (Class<? extends Channel>) rdmaClass("RdmaSocketChannel");
    }

    /** The server channel class. */
    @SuppressWarnings("unchecked")
    public Class<? extends ServerChannel> serverChannelClass() {
        return this == NIO
                ? NioServerSocketChannel.class
                : (Class<? extends ServerChannel>) rdmaClass("RdmaServerSocketChannel");
    }

    /** A server bootstrap over this transport, both sides on {@code group}. */
    public ServerBootstrap serverBootstrap(EventLoopGroup group) {
        return new ServerBootstrap().group(group).channel(serverChannelClass());
    }

    /** A client bootstrap over this transport on {@code group}. */
    public Bootstrap bootstrap(EventLoopGroup group) {
        return new Bootstrap().group(group).channel(channelClass());
    }

    /**
     * The address to bind: the guest's address on the rxe interface for RDMA (rdma_cm binds only to
     * addresses of RDMA-capable interfaces) and for NIO in the guest (TCP on the same interface);
     * the loopback address for NIO elsewhere.
     */
    public InetSocketAddress address(int port) {
        try {
            InetAddress ip = this == NIO && !RdmaTestSupport.inGuest()
                    ? InetAddress.getLoopbackAddress()
                    : InetAddress.getByName(RdmaTestSupport.guestIp());
            return new InetSocketAddress(ip, port);
        } catch (UnknownHostException e) {
            throw new IllegalStateException("the guest address " + RdmaTestSupport.guestIp() + " does not resolve", e);
        }
    }

    /** Closes {@code server} and shuts {@code group} down, each when there is one, waiting for both. */
    public static void close(Channel server, EventLoopGroup group) {
        if (server != null) {
            server.close().syncUninterruptibly();
        }
        if (group != null) {
            group.shutdownGracefully(0, 1, java.util.concurrent.TimeUnit.SECONDS)
                    .syncUninterruptibly();
        }
    }

    private static Class<?> rdmaClass(String simpleName) {
        String name = "org.verbs4j.netty." + simpleName;
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(
                    name + " is not on the class path: build verbs-netty's main classes, or run"
                            + " over Netty's NIO transport with -D" + PROPERTY + "=nio",
                    e);
        }
    }
}
