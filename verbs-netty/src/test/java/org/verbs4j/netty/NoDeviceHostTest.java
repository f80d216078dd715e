package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import java.net.BindException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * On a host without an RDMA device (no {@code /dev/infiniband/rdma_cm}), where the transport's
 * connection-manager channel cannot be opened: every bind fails with a {@link BindException} and
 * every connect with a {@link ConnectException}, each naming the call that failed, however many
 * times it is tried (not an error on the first try and a {@link NoClassDefFoundError} after).
 */
class NoDeviceHostTest {
    @Test
    void everyBindAndConnectFailsClearlyWithoutADevice() throws Exception {
        assumeFalse(Files.exists(Path.of("/dev/infiniband/rdma_cm")), "this host has rdma_cm");
        EventLoopGroup g = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        InetSocketAddress at = new InetSocketAddress(InetAddress.getLoopbackAddress(), 18515);
        try {
            for (int i = 0; i < 2; i++) {
                ChannelFuture bind = new ServerBootstrap()
                        .group(g)
                        .channel(RdmaServerSocketChannel.class)
                        .childHandler(new ChannelInboundHandlerAdapter())
                        .bind(at);
                assertFailedNamingTheChannel(bind, BindException.class, "bind " + i);

                ChannelFuture connect = new Bootstrap()
                        .group(g)
                        .channel(RdmaSocketChannel.class)
                        .handler(new ChannelInboundHandlerAdapter())
                        .connect(at);
                assertFailedNamingTheChannel(connect, ConnectException.class, "connect " + i);
            }
        } finally {
            g.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** {@code f} ended with a {@code type} that names the call that failed, rdma_create_event_channel. */
    private static void assertFailedNamingTheChannel(ChannelFuture f, Class<? extends Throwable> type, String what)
            throws InterruptedException {
        assertTrue(f.await(60, TimeUnit.SECONDS), what + " did not end");
        assertInstanceOf(type, f.cause(), what);
        assertTrue(
                f.cause().getMessage().contains("rdma_create_event_channel"),
                f.cause().getMessage());
    }
}
