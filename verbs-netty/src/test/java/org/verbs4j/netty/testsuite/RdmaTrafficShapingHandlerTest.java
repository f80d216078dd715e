package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.TrafficShapingHandlerTest;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/**
 * Netty's {@link TrafficShapingHandlerTest} over the transport under test, after the shaping
 * handlers ran once ({@link ShapingWarmUp}).
 */
@OverTransport(inTier = false)
@ExtendWith({SuiteWarmUp.class, ShapingWarmUp.class})
class RdmaTrafficShapingHandlerTest extends TrafficShapingHandlerTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return TransportTestPermutation.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }
}
