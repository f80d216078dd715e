package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Server;
import io.netty.channel.EventLoopGroup;
import java.net.InetSocketAddress;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * {@link GrpcCalls} with the server in this JVM, on an event loop group of its own, so that each
 * call crosses the transport between two groups.
 */
@OverTransport(inTier = false)
class GrpcOverTransportTest extends GrpcCalls {
    /** The server's reports of the ends of calls (see {@link EchoService}). */
    private final BlockingQueue<String> ends = new LinkedBlockingQueue<>();

    private EventLoopGroup serverGroup;
    private Server server;

    @Override
    InetSocketAddress startServer() throws Exception {
        serverGroup = transport.newGroup(1, "grpc-server");
        server = new EchoService(ends::add).serve(transport, serverGroup);
        return new InetSocketAddress(transport.address(0).getAddress(), server.getPort());
    }

    @Override
    void stopServer() throws InterruptedException {
        if (server != null) {
            server.shutdownNow().awaitTermination(WAIT_S, TimeUnit.SECONDS);
        }
        if (serverGroup != null) {
            serverGroup.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    @Override
    String serverSawEnd(String call) throws InterruptedException {
        while (true) {
            String end = ends.poll(WAIT_S, TimeUnit.SECONDS);
            assertTrue(end != null, "the server saw no end of " + call + " within " + WAIT_S + " s");
            if (end.startsWith(call + " ")) {
                return end.substring(call.length() + 1);
            }
        }
    }
}
