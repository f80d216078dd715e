package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.DeviceMemoryVerbs;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * Memory on the adapter itself ({@code struct ibv_dm}, {@code ibv_alloc_dm}; mlx5's MEMIC): the
 * CPU reaches it only by copies ({@link #write}, {@link #read}: {@code ibv_memcpy_to_dm},
 * {@code ibv_memcpy_from_dm}, bounds-checked against both the allocation and the Java segment),
 * and the device through a region registered on it ({@link #register}: {@code ibv_reg_dm_mr},
 * zero-based, so SGEs and remote addresses name offsets from 0). Where the device has none
 * ({@code max_dm_size} 0, e.g. rxe) allocation is refused with EOPNOTSUPP naming that attribute.
 *
 * <p>Owned by its {@link Context}; refuses to close (EBUSY) while a region registered on it is
 * open. Thread-safe: a copy and a close on another thread never meet (the close is refused).
 */
public final class DeviceMemory extends NativeResource {
    /** What a device without device memory lacks. */
    static final String NO_DM = "device attribute max_dm_size is 0";

    private final Context context;
    private final long length;

    private DeviceMemory(Context context, MemorySegment dm, long length, Destroyer destroy) {
        super(context, "device memory", "ibv_free_dm", dm, destroy, null);
        this.context = context;
        this.length = length;
    }

    /** {@code ibv_alloc_dm} of {@code length} bytes on {@code ctx}, after the capability check. */
    static DeviceMemory allocate(Context ctx, long length) {
        String verb = "ibv_alloc_dm";
        ctx.ensureOpen(verb);
        long max = Capabilities.maxDmSize(ctx);
        if (max == 0) {
            throw VerbsException.create(
                    verb,
                    Errno.EOPNOTSUPP,
                    ctx.deviceName() + " offers no device memory: " + NO_DM,
                    "keep the data in host memory (allocateMemoryRegion), "
                            + "or use a device whose driver implements it (e.g. mlx5)");
        }
        if (length <= 0 || Long.compareUnsigned(length, max) > 0) {
            throw new InvalidRequestException(
                    verb,
                    "a length of " + length + " bytes; " + ctx.deviceName() + " allocates 1 to " + max
                            + " (max_dm_size)",
                    "ask for at most max_dm_size bytes (Context.capabilities() reports it)");
        }
        ctx.pin(verb);
        try {
            return new DeviceMemory(
                    ctx, DeviceMemoryVerbs.allocDm(ctx.handle, length), length, DeviceMemoryVerbs::freeDm);
        } catch (VerbsException e) {
            throw VerbsException.create(
                    verb,
                    e.errno(),
                    "the provider of " + ctx.deviceName() + " refused " + length + " bytes of device memory",
                    "free device memory no longer used, or ask for less (ENOMEM: the device has no more)");
        } finally {
            ctx.unpin();
        }
    }

    /** The context it was allocated on. */
    public Context context() {
        return context;
    }

    /** Its size in bytes. */
    public long length() {
        return length;
    }

    /**
     * {@code ibv_memcpy_to_dm}: copies all of {@code source} (a native segment) into this memory
     * at {@code offset}. Refused (EINVAL) when the bytes would not fit, before anything is copied.
     */
    public void write(long offset, MemorySegment source) {
        copy("ibv_memcpy_to_dm", offset, source, true);
    }

    /**
     * {@code ibv_memcpy_from_dm}: fills all of {@code destination} (a native, writable segment)
     * from this memory at {@code offset}. Refused (EINVAL) when the range lies outside.
     */
    public void read(long offset, MemorySegment destination) {
        copy("ibv_memcpy_from_dm", offset, destination, false);
    }

    private void copy(String verb, long offset, MemorySegment host, boolean toDevice) {
        if (host == null || !host.isNative()) {
            throw new InvalidRequestException(
                    verb,
                    "the host segment is "
                            + (host == null ? "null" : "a heap segment (the provider copies from an address)"),
                    "pass a native segment (Arena.allocate), copying heap data into it first");
        }
        if (!toDevice && host.isReadOnly()) {
            throw new InvalidRequestException(verb, "the destination segment is read-only", "pass a writable segment");
        }
        checkRange(verb, offset, host.byteSize());
        pin(verb);
        try {
            int rc;
            try {
                rc = toDevice
                        ? DeviceMemoryVerbs.memcpyToDm(handle, offset, host)
                        : DeviceMemoryVerbs.memcpyFromDm(host, handle, offset);
            } catch (IllegalStateException | WrongThreadException e) {
                throw new InvalidRequestException(
                        verb,
                        Errno.EFAULT,
                        "the host segment cannot be accessed here: " + e.getMessage(),
                        "keep the segment's arena open, and use a confined segment on its own thread");
            }
            if (rc != 0) {
                throw VerbsException.create(
                        verb,
                        rc,
                        "the provider refused to copy " + host.byteSize() + " bytes at offset " + offset + " of "
                                + describe(),
                        "copy within the allocation, aligned as the device requires (mlx5: 4 bytes)");
            }
        } finally {
            unpin();
        }
    }

    /** Refuses a range {@code [offset, offset + n)} that does not lie inside the allocation. */
    private void checkRange(String verb, long offset, long n) {
        if (offset < 0 || n < 0 || offset > length || n > length - offset) {
            throw new InvalidRequestException(
                    verb,
                    "the range [" + offset + ", +" + n + ") lies outside the " + length + " bytes of " + describe(),
                    "keep offset + length within length() of the device memory");
        }
    }

    /**
     * {@code ibv_reg_dm_mr}: registers {@code [offset, offset + length)} of this memory in
     * {@code pd}, zero-based ({@code IBV_ACCESS_ZERO_BASED}: SGEs and peers address it from 0).
     * The region has no host view; this memory refuses to close while it is open.
     */
    public MemoryRegion register(ProtectionDomain pd, long offset, long length, Set<Access> access) {
        return register(pd, offset, length, access, LibIbverbs::deregMr);
    }

    /** A region deregistered by {@code dereg} (a test's stand-in). */
    MemoryRegion register(ProtectionDomain pd, long offset, long length, Set<Access> access, Destroyer dereg) {
        String verb = "ibv_reg_dm_mr";
        if (pd == null || access == null) {
            throw new InvalidRequestException(
                    verb, "the protection domain or the access set is null", "pass a PD and a set of Access rights");
        }
        pd.requireContext(
                verb, context, "device memory", "register device memory in a protection domain of the same context");
        if (length <= 0) {
            throw new InvalidRequestException(
                    verb, "an empty range (length " + length + ")", "register 1 byte or more");
        }
        checkRange(verb, offset, length);
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                && !access.contains(Access.LOCAL_WRITE)) {
            throw VerbsException.create(
                    verb, Errno.EINVAL, "REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE", "add Access.LOCAL_WRITE");
        }
        NativeResource.pinAll(verb, this, pd);
        boolean pinnedForRegion = false;
        try {
            MemorySegment mr;
            try {
                mr = DeviceMemoryVerbs.regDmMr(
                        context.handle,
                        pd.handle,
                        handle,
                        offset,
                        length,
                        Access.mask(access) | DeviceMemoryVerbs.ACCESS_ZERO_BASED);
            } catch (VerbsException e) {
                throw VerbsException.create(
                        verb,
                        e.errno(),
                        "the provider refused [" + offset + ", +" + length + ") of " + describe() + " with " + access,
                        "register with rights the device grants device memory (e.g. LOCAL_WRITE, REMOTE_READ)");
            }
            // the region keeps this memory pinned (its close refused) until it is deregistered
            pin(verb);
            pinnedForRegion = true;
            MemoryRegion r = new MemoryRegion(
                    pd,
                    mr,
                    0,
                    length,
                    0,
                    access,
                    h -> {
                        dereg.destroy(h);
                        unpin();
                    },
                    mr.get(JAVA_INT, ObjectLayout.MR_LKEY),
                    mr.get(JAVA_INT, ObjectLayout.MR_RKEY));
            pinnedForRegion = false;
            return r;
        } finally {
            if (pinnedForRegion) {
                unpin();
            }
            NativeResource.unpinAll(this, pd);
        }
    }
}
