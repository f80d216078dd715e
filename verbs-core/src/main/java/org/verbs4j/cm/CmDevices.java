package org.verbs4j.cm;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.verbs4j.Context;
import org.verbs4j.DeviceAttributes;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.natives.ContextLayout;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.LibRdmacm;

/**
 * librdmacm opens each RDMA device once and keeps it open ({@code id->verbs}); this keeps one
 * verbs4j {@link Context} borrowing each such {@code ibv_context}, and one protection domain per
 * device for connections that bring none, for the life of the JVM (as librdmacm keeps its
 * contexts). A device-removal event drops the device's entry. Thread-safe.
 */
final class CmDevices {
    /**
     * A device as librdmacm opened it: the context, the library's PD on it, and its attributes,
     * queried once (they are fixed for the device's life; each connect and accept needs them, and
     * {@code ibv_query_device} is a system call).
     */
    record Device(Context context, ProtectionDomain pd, DeviceAttributes attributes) {}

    private static final Map<Long, Device> BY_CONTEXT = new ConcurrentHashMap<>();

    private CmDevices() {}

    /** The device of {@code verbs} (an {@code ibv_context *} from a cm id). */
    static Device of(MemorySegment verbs) {
        return BY_CONTEXT.computeIfAbsent(verbs.address(), a -> {
            MemorySegment ctx = verbs.reinterpret(ContextLayout.SIZE);
            String name =
                    LibIbverbs.getDeviceName(ctx.get(java.lang.foreign.ValueLayout.ADDRESS, ContextLayout.DEVICE));
            Context c = CoreAccess.get().borrowContext(ctx, name);
            return new Device(c, c.allocateProtectionDomain(), c.queryDevice());
        });
    }

    /** {@code rdma_bind_addr} of {@code id} to {@code address} (port 0): the device it belongs to, or ENODEV. */
    static Device bind(MemorySegment id, java.net.InetAddress address) {
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            LibRdmacm.bindAddr(id, CmStructs.sockaddr(a, new java.net.InetSocketAddress(address, 0)));
        }
        MemorySegment verbs = CmStructs.verbs(id);
        if (verbs.address() == 0) {
            throw org.verbs4j.VerbsException.create(
                    "rdma_bind_addr",
                    org.verbs4j.natives.Errno.ENODEV,
                    address.getHostAddress() + " belongs to no RDMA device",
                    "give the address of an interface that has an RDMA device (rdma link show)");
        }
        return of(verbs);
    }

    static void removed(MemorySegment verbs) {
        BY_CONTEXT.remove(verbs.address());
    }
}
