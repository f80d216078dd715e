package org.verbs4j.netty;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.TestWatcher;
import org.verbs4j.testing.PeerJvm;

/**
 * {@link GrpcCalls} between two JVMs: the server is {@link GrpcPeer} in a second JVM on this JVM's
 * class path, over the same transport; the client is this JVM. What the server saw of the calls the
 * client ended comes back in the peer's output. A failed test prints everything the peer printed;
 * when the class ends the peer's input is closed, it must stop cleanly within a bound, and it is
 * killed if it has not.
 */
@OverTransport(inTier = false)
class GrpcTwoJvmTest extends GrpcCalls {
    /**
     * The bound on the peer's start: in the emulated guest it loads gRPC's, Netty's and protobuf's
     * classes from the shared folder under single-threaded TCG, minutes on a loaded host.
     */
    private static final int START_S = 600;

    private PeerJvm peer;

    @RegisterExtension
    final TestWatcher peerOutputOnFailure = new TestWatcher() {
        @Override
        public void testFailed(ExtensionContext context, Throwable cause) {
            if (peer != null) {
                System.out.println("GrpcTwoJvmTest: " + context.getDisplayName() + " failed; the peer printed:\n  "
                        + String.join("\n  ", peer.output()));
            }
        }
    };

    @Override
    InetSocketAddress startServer() throws Exception {
        long t0 = System.nanoTime();
        // C1 only: the peer starts several times faster in the emulated guest
        peer = new PeerJvm(
                GrpcPeer.class,
                List.of(
                        "-XX:TieredStopAtLevel=1",
                        "-D" + TestTransport.PROPERTY + "=" + transport.name().toLowerCase(Locale.ROOT)));
        String[] listening = peer.awaitLine("LISTENING ", START_S).split(" ");
        System.out.printf("GrpcTwoJvmTest: the peer JVM listened after %.1f s%n", (System.nanoTime() - t0) / 1e9);
        return new InetSocketAddress(listening[1], Integer.parseInt(listening[2]));
    }

    @Override
    void stopServer() throws Exception {
        if (peer == null) {
            return;
        }
        try (PeerJvm p = peer) {
            p.endInput();
            List<String> said = p.awaitSuccess(WAIT_S);
            System.out.println("GrpcTwoJvmTest: the peer printed:\n  " + String.join("\n  ", said));
        }
    }

    @Override
    String serverSawEnd(String call) throws InterruptedException {
        String prefix = "SERVER " + call + " ";
        return peer.awaitLine(prefix, WAIT_S).substring(prefix.length());
    }
}
