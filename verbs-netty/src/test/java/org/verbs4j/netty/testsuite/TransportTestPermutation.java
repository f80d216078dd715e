package org.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import java.net.SocketAddress;
import java.util.List;
import org.verbs4j.netty.TestTransport;

/**
 * The bootstrap factories Netty's socket tests run with here, as Netty's epoll and io_uring modules
 * supply theirs: a server on a boss and a worker group of {@link TestTransport#current()}, a client
 * on the worker group, an address on the rxe interface. The peers of a combo speak the same
 * transport: an RDMA channel does not talk to a TCP one, so there are no mixed combos.
 */
final class TransportTestPermutation {
    private TransportTestPermutation() {}

    /** The groups, made on first use and shared by every test of the JVM, as Netty's permutations do. */
    private static final class Groups {
        static final TestTransport TRANSPORT = TestTransport.current();
        static final String NAME = "testsuite-" + TRANSPORT.name().toLowerCase(java.util.Locale.ROOT);
        static final EventLoopGroup BOSS = TRANSPORT.newGroup(1, NAME + "-boss");
        static final EventLoopGroup WORKER = TRANSPORT.newGroup(2, NAME + "-worker");
    }

    static List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return List.of(new BootstrapComboFactory<>() {
            @Override
            public ServerBootstrap newServerInstance() {
                return new ServerBootstrap()
                        .group(Groups.BOSS, Groups.WORKER)
                        .channel(Groups.TRANSPORT.serverChannelClass());
            }

            @Override
            public Bootstrap newClientInstance() {
                return Groups.TRANSPORT.bootstrap(Groups.WORKER);
            }
        });
    }

    static List<BootstrapFactory<Bootstrap>> clientSocket() {
        return List.of(() -> Groups.TRANSPORT.bootstrap(Groups.WORKER));
    }

    /** Port 0: the transport picks one, which the tests read back from the bound channel. */
    static SocketAddress address() {
        return Groups.TRANSPORT.address(0);
    }
}
