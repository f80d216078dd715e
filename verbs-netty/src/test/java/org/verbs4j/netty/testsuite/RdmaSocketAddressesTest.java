package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketAddressesTest;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/** Netty's {@link SocketAddressesTest} over the transport under test. */
@OverTransport(inTier = false)
@ExtendWith(SuiteWarmUp.class)
class RdmaSocketAddressesTest extends SocketAddressesTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return TransportTestPermutation.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }

    @Override
    protected void assertAddress(SocketAddress address) {
        InetSocketAddress a = Assertions.assertInstanceOf(InetSocketAddress.class, address);
        Assertions.assertNotEquals(0, a.getPort(), "a bound channel's port: " + a);
        Assertions.assertFalse(a.getAddress().isAnyLocalAddress(), "a connected channel's address: " + a);
    }
}
