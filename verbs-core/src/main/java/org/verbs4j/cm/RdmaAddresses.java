package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.util.List;
import org.verbs4j.DeviceUnavailableException;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibRdmacm;
import org.verbs4j.natives.NativeLibraries;

/**
 * Names and numeric addresses to socket addresses through librdmacm's {@code rdma_getaddrinfo}
 * (which knows RDMA-specific names as well as DNS and {@code /etc/hosts}). Stateless; any thread.
 * The name service may take its own time: these calls are bounded by the resolver's timeouts.
 */
public final class RdmaAddresses {
    private RdmaAddresses() {}

    /** The addresses to connect to {@code host} (a name or a numeric address) on {@code port}. */
    public static List<InetSocketAddress> resolve(String host, int port) {
        return lookup(host, port, false);
    }

    /** The local addresses to listen on for {@code host} (null: every address) and {@code port}. */
    public static List<InetSocketAddress> resolvePassive(String host, int port) {
        return lookup(host, port, true);
    }

    private static List<InetSocketAddress> lookup(String host, int port, boolean passive) {
        if (port < 0 || port > 65535) {
            throw new InvalidRequestException("rdma_getaddrinfo", "the port must be 0..65535: " + port);
        }
        if (!passive && (host == null || host.isEmpty())) {
            throw new InvalidRequestException("rdma_getaddrinfo", "a host to connect to is needed");
        }
        NativeLibraries.rdmacm()
                .orElseThrow(() -> new DeviceUnavailableException(
                        "rdma_getaddrinfo",
                        Errno.ENOENT,
                        NativeLibraries.rdmacmUnavailabilityCause().orElse("librdmacm is not available"),
                        null));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment node = host == null ? MemorySegment.NULL : a.allocateFrom(host);
            MemorySegment service = a.allocateFrom(Integer.toString(port));
            MemorySegment res = a.allocate(java.lang.foreign.ValueLayout.ADDRESS);
            LibRdmacm.getAddrInfo(
                    node,
                    service,
                    CmStructs.hints(a, passive, false, LibRdmacm.RDMA_PS_TCP),
                    res,
                    (host == null ? "*" : host) + ":" + port);
            MemorySegment list = res.get(java.lang.foreign.ValueLayout.ADDRESS, 0);
            try {
                List<InetSocketAddress> out = CmStructs.addresses(list, passive);
                if (out.isEmpty()) {
                    throw new org.verbs4j.VerbsException(
                            "rdma_getaddrinfo", Errno.ENOENT, host + ":" + port + " resolved to no IP address", null);
                }
                return List.copyOf(out);
            } finally {
                LibRdmacm.freeAddrInfo(list);
            }
        }
    }
}
