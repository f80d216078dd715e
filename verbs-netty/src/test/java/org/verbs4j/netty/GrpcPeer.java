package org.verbs4j.netty;

import io.grpc.Server;
import io.netty.channel.EventLoopGroup;
import java.util.concurrent.TimeUnit;
import org.verbs4j.testing.PeerJvm;

/**
 * The server of {@link GrpcTwoJvmTest}, run in a second JVM: an {@link EchoService} over the
 * transport that {@value TestTransport#PROPERTY} names, on an ephemeral port of the test address.
 * Prints {@code LISTENING <address> <port>}, then {@code SERVER <call> <status code>} for each call
 * the client ended (see {@link EchoService}); serves until its standard input ends (the test closes
 * it, or the test JVM dies), then stops and prints what it served and the transport's totals, then
 * {@code PEER OK} (exit 0), or {@code PEER FAILED} with the failure (exit 1).
 */
public final class GrpcPeer {
    private GrpcPeer() {}

    /** Serves until standard input ends. */
    public static void main(String[] args) {
        say("PEER main " + PeerJvm.uptimeMillis() + " ms after the JVM started");
        PeerJvm.exitAfter(GrpcPeer::serve);
    }

    private static void serve() throws Exception {
        TestTransport transport = TestTransport.current();
        EventLoopGroup group = transport.newGroup(1, "grpc-peer");
        say("PEER event loop group over " + transport + " made " + PeerJvm.uptimeMillis()
                + " ms after the JVM started");
        EchoService service = new EchoService(end -> say("SERVER " + end));
        try {
            Server server = service.serve(transport, group);
            try {
                say("LISTENING " + transport.address(0).getAddress().getHostAddress() + " " + server.getPort()
                        + " over " + transport + ", " + PeerJvm.uptimeMillis() + " ms after the JVM started; "
                        + RdmaStats.snapshot());
                while (System.in.read() >= 0) {
                    // the test writes nothing: only the end of the input matters
                }
                say("PEER input ended after " + service.calls() + " calls; " + RdmaStats.snapshot());
            } finally {
                server.shutdownNow();
                if (!server.awaitTermination(GrpcCalls.WAIT_S, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("the server did not terminate within " + GrpcCalls.WAIT_S + " s");
                }
            }
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        }
        say("PEER stopped; " + RdmaStats.snapshot());
    }

    /** Prints {@code line} at once (the test reads the output as it comes). */
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
