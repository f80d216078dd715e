package org.verbs4j.netty.testsuite;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketMultipleConnectTest;
import java.net.SocketAddress;
import java.nio.channels.AlreadyConnectedException;
import java.util.List;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/**
 * Netty's {@link SocketMultipleConnectTest} over the transport under test. Netty's case binds
 * {@code NetUtil.LOCALHOST} ({@code ::1}), written into its body rather than taken from
 * {@link #newSocketAddress()}: an address no RDMA device serves. The per-combo method is its body
 * with that one change, the server bound on {@link #newSocketAddress()}; the rest (a registered
 * client connected, a second connect failing with {@link AlreadyConnectedException}) is Netty's.
 */
@OverTransport(inTier = false)
@ExtendWith(SuiteWarmUp.class)
class RdmaSocketMultipleConnectTest extends SocketMultipleConnectTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return TransportTestPermutation.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }

    @Override
    public void testMultipleConnect(ServerBootstrap sb, Bootstrap cb) throws Exception {
        Channel sc = null;
        Channel cc = null;
        try {
            sb.childHandler(new ChannelInboundHandlerAdapter());
            sc = sb.bind(newSocketAddress()).syncUninterruptibly().channel();

            cb.handler(new ChannelInboundHandlerAdapter());
            cc = cb.register().syncUninterruptibly().channel();
            cc.connect(sc.localAddress()).syncUninterruptibly();
            ChannelFuture connectFuture2 = cc.connect(sc.localAddress()).await();
            assertInstanceOf(AlreadyConnectedException.class, connectFuture2.cause());
        } finally {
            if (cc != null) {
                cc.close().syncUninterruptibly();
            }
            if (sc != null) {
                sc.close().syncUninterruptibly();
            }
        }
    }
}
