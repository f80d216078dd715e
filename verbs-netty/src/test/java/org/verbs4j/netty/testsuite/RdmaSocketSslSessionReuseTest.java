package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketSslSessionReuseTest;
import java.net.SocketAddress;
import java.util.List;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.verbs4j.netty.OverTransport;

/**
 * Netty's {@link SocketSslSessionReuseTest} over the transport under test, with the JDK's TLS: its
 * trust-manager case also runs OpenSSL, which needs netty-tcnative (not a dependency here).
 */
@OverTransport(inTier = false)
@ExtendWith(SuiteWarmUp.class)
class RdmaSocketSslSessionReuseTest extends SocketSslSessionReuseTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return TransportTestPermutation.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return TransportTestPermutation.address();
    }

    @Override
    @ParameterizedTest(name = "{index}: serverEngine = {0}, clientEngine = {1}")
    @MethodSource("io.netty.testsuite.transport.socket.SocketSslSessionReuseTest#jdkOnly")
    public void testSslSessionTrustManagerResumption(
            SslContextBuilder serverCtx, SslContextBuilder clientCtx, TestInfo testInfo) throws Throwable {
        super.testSslSessionTrustManagerResumption(serverCtx, clientCtx, testInfo);
    }
}
