package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;

/**
 * The registration step of a {@link BufferPool}: turns one allocated region into a
 * {@link MemoryRegion} of a protection domain. The default is {@code ibv_reg_mr}
 * ({@link ProtectionDomain#register(MemorySegment, Set)}); a GPU module supplies one that
 * registers device memory (e.g. {@code ibv_reg_dmabuf_mr}); tests supply one that wraps memory
 * under made-up keys and counts the calls.
 *
 * <p>A pool calls it only while it is being built (once per region), from the building thread,
 * and never afterwards; the pool closes what it returns when the pool closes.
 */
@FunctionalInterface
public interface Registrar {
    /**
     * Registers {@code memory} (the whole allocation) with {@code access} in {@code pd}.
     *
     * @return an open region covering exactly {@code memory}
     */
    MemoryRegion register(ProtectionDomain pd, MemorySegment memory, Set<Access> access);

    /**
     * Registers device memory ({@link RegionAllocator.Allocation#device}): {@code byteSize} bytes
     * at {@code address}, which the CPU cannot touch. The default refuses: only a registrar of a
     * device-memory module (e.g. verbs-gpudirect's) knows how.
     *
     * @return an open region without a host view whose {@link MemoryRegion#address()} is {@code address}
     */
    default MemoryRegion registerDevice(ProtectionDomain pd, long address, long byteSize, Set<Access> access) {
        throw new org.verbs4j.InvalidRequestException(
                "Registrar.registerDevice",
                "this registrar registers host memory " + "only, and the allocator gave device memory at 0x"
                        + Long.toHexString(address),
                "use the device allocator's own registrar (RegionAllocator.registrar())");
    }

    /**
     * {@code ibv_reg_mr}: {@link ProtectionDomain#register(MemorySegment, Set)} of a global view of
     * the pool's own allocation: the pool owns that memory and frees it only after it has
     * deregistered the region, which is what the registration of closeable arena memory requires.
     */
    static Registrar ibvRegMr() {
        return (pd, memory, access) ->
                pd.register(MemorySegment.ofAddress(memory.address()).reinterpret(memory.byteSize()), access);
    }

    /** How a device-memory module registers {@code byteSize} bytes of device memory at {@code address}. */
    @FunctionalInterface
    interface DeviceRegistration {
        /**
         * Registers device memory.
         *
         * @param pd       the protection domain to register in
         * @param address  the device address (never dereferenced on the host)
         * @param byteSize how many bytes
         * @param access   the access the region grants
         * @return the region, owned by the caller
         */
        MemoryRegion register(ProtectionDomain pd, long address, long byteSize, Set<Access> access);
    }

    /**
     * A registrar of device memory only: {@link #registerDevice} runs {@code registration}, and
     * {@link #register} (host memory) refuses.
     */
    static Registrar device(DeviceRegistration registration) {
        java.util.Objects.requireNonNull(registration, "registration");
        return new Registrar() {
            @Override
            public MemoryRegion register(ProtectionDomain pd, MemorySegment memory, Set<Access> access) {
                throw new org.verbs4j.InvalidRequestException(
                        "Registrar.register",
                        "this registrar registers device " + "memory only, and the allocator gave host memory",
                        "use Registrar.ibvRegMr() for host memory");
            }

            @Override
            public MemoryRegion registerDevice(ProtectionDomain pd, long address, long byteSize, Set<Access> access) {
                return registration.register(pd, address, byteSize, access);
            }
        };
    }
}
