package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketDataReadInitialStateTest;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/** Netty's {@link SocketDataReadInitialStateTest} over the transport under test. */
@OverTransport(inTier = false)
@ExtendWith(SuiteWarmUp.class)
class RdmaSocketDataReadInitialStateTest extends SocketDataReadInitialStateTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return TransportTestPermutation.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }
}
