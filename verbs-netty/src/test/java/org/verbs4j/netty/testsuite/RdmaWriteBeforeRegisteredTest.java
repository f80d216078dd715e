package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.WriteBeforeRegisteredTest;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.netty.OverTransport;

/** Netty's {@link WriteBeforeRegisteredTest} over the transport under test. */
@OverTransport(inTier = false)
@ExtendWith(SuiteWarmUp.class)
class RdmaWriteBeforeRegisteredTest extends WriteBeforeRegisteredTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return TransportTestPermutation.clientSocket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }
}
