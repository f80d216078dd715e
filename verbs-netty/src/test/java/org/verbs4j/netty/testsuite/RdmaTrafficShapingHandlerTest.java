package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.TrafficShapingHandlerTest;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/**
 * Netty's {@link TrafficShapingHandlerTest} over the transport under test, after the shaping
 * handlers ran once ({@link ShapingWarmUp}), its cases in the order of their names, so that the
 * first, which still meets the test's own code cold, is {@code testAutoReadGlobalTrafficShapping}
 * (its steps are checked against 0 to 10 ms) rather than JUnit's default first,
 * {@code testReadTrafficShapping} (a 100 ms step and a 3 KiB/s floor): in the emulated guest that
 * one failed as the first case over Netty's NIO transport too.
 */
@OverTransport(inTier = false)
@ExtendWith({SuiteWarmUp.class, ShapingWarmUp.class})
@TestMethodOrder(MethodOrderer.MethodName.class)
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
