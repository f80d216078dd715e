package org.verbs4j.netty;

import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.verbs4j.Context;
import org.verbs4j.VerbsException;
import org.verbs4j.cm.CmEventChannel;

/**
 * The blocking half of connection setup, off the event loops: the JVM's one connection-manager
 * event channel (with its own event thread), the daemon threads that resolve, connect and accept
 * (each bounded by a timeout), and the lookup of the RDMA device that serves an address. Any
 * thread.
 */
final class Connector {
    private static final ExecutorService THREADS = Executors.newCachedThreadPool(
            Thread.ofPlatform().daemon().name("verbs4j-netty-connect-", 0).factory());

    private Connector() {}

    /** Opened on first use; guarded by {@code Connector.class}. */
    private static CmEventChannel cm;

    /**
     * The connection-manager event channel of every connection of this transport, opened on first
     * use. Where it cannot be opened (no RDMA device) each call throws the {@link VerbsException}
     * that says why, which the bind or connect turns into its own exception; a class initialiser
     * would throw it once, wrapped in an error, and every later call a {@link NoClassDefFoundError}.
     */
    static synchronized CmEventChannel cm() {
        if (cm == null) {
            cm = CmEventChannel.open();
        }
        return cm;
    }

    /** Runs blocking setup work on a connecting thread. */
    static void run(Runnable task) {
        THREADS.execute(task);
    }

    /**
     * The device context of the local address {@code local}, or an exception naming the address
     * and the rule: rdma_cm binds only to addresses of RDMA-capable interfaces.
     */
    static Context deviceOf(InetAddress local) throws java.net.ConnectException {
        try {
            return cm().deviceContext(local);
        } catch (VerbsException e) {
            java.net.ConnectException c = new java.net.ConnectException("no RDMA device serves "
                    + local.getHostAddress() + ": rdma_cm binds only to addresses of RDMA-capable interfaces ("
                    + e.getMessage() + ")");
            c.initCause(e);
            throw c;
        }
    }

    /** The local address the kernel's routing picks to reach {@code remote} (no packet is sent). */
    static InetAddress routeTo(InetSocketAddress remote) throws SocketException {
        if (remote.isUnresolved()) {
            throw new SocketException("unresolved address " + remote + ": give an IP address or a resolvable name");
        }
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(remote.getAddress(), Math.max(1, remote.getPort()));
            InetAddress a = s.getLocalAddress();
            return a.isAnyLocalAddress() ? remote.getAddress() : a;
        }
    }
}
