package org.verbs4j.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.VerbsException;

/**
 * A pool's memory, allocated and registered once while the pool is built: one region per size
 * class, or one for all; each registration is checked to cover its allocation. The buffers see
 * the memory through views in one shared arena ({@link #views}), which dies first when the pool
 * closes. If anything fails, what was done is undone in order (the views die, each region is
 * deregistered, then its memory freed; memory whose deregistration failed is leaked, never freed)
 * and the failure is rethrown. Used by the building thread only.
 */
final class PoolMemory {
    /** Region alignment: a page of this machine ({@code sysconf(_SC_PAGESIZE)}), so that no two regions share one. */
    static final long REGION_ALIGNMENT = org.verbs4j.natives.LibC.PAGE_SIZE;

    /** Makes the buffers of class {@code k} over {@code view} (the region's memory) from {@code offset}. */
    interface Slots {
        void make(SizeClass k, MemoryRegion mr, MemorySegment view, long offset);
    }

    final Arena views;
    final List<MemoryRegion> regions;
    final List<RegionAllocator.Allocation> allocations;

    private PoolMemory(Arena views, List<MemoryRegion> regions, List<RegionAllocator.Allocation> allocations) {
        this.views = views;
        this.regions = List.copyOf(regions);
        this.allocations = List.copyOf(allocations);
    }

    static PoolMemory allocate(
            RegionAllocator allocator,
            Registrar registrar,
            ProtectionDomain pd,
            Set<Access> access,
            boolean singleRegion,
            SizeClass[] classes,
            Slots slots) {
        // regs.get(i) registers allocs.get(i)
        List<MemoryRegion> regs = new ArrayList<>();
        List<RegionAllocator.Allocation> allocs = new ArrayList<>();
        Arena views = Arena.ofShared();
        try {
            if (singleRegion) {
                long[] offsets = new long[classes.length];
                long bytes = 0;
                for (SizeClass k : classes) {
                    offsets[k.index] = bytes;
                    bytes = HugePageAllocator.roundUp(bytes + (long) k.size * k.count, REGION_ALIGNMENT);
                }
                RegionAllocator.Allocation a = allocate(allocator, bytes);
                allocs.add(a);
                MemoryRegion mr = register(registrar, pd, a, access);
                regs.add(mr);
                MemorySegment view = view(a, views);
                for (SizeClass k : classes) {
                    slots.make(k, mr, view, offsets[k.index]);
                }
            } else {
                for (SizeClass k : classes) {
                    RegionAllocator.Allocation a = allocate(allocator, (long) k.size * k.count);
                    allocs.add(a);
                    MemoryRegion mr = register(registrar, pd, a, access);
                    regs.add(mr);
                    slots.make(k, mr, view(a, views), 0);
                }
            }
        } catch (RuntimeException | Error e) {
            views.close();
            // deregister, then free; memory whose deregistration failed is leaked, never freed
            for (int r = allocs.size() - 1; r >= 0; r--) {
                boolean deregistered = true;
                if (r < regs.size()) {
                    try {
                        regs.get(r).close();
                    } catch (RuntimeException suppressed) {
                        deregistered = false;
                        e.addSuppressed(suppressed);
                    }
                }
                if (deregistered) {
                    allocs.get(r).close();
                }
            }
            throw e;
        }
        return new PoolMemory(views, regs, allocs);
    }

    /** One region's memory; an allocation the allocator cannot make is refused with its size named (ENOMEM). */
    private static RegionAllocator.Allocation allocate(RegionAllocator allocator, long bytes) {
        try {
            return allocator.allocate(bytes, REGION_ALIGNMENT);
        } catch (OutOfMemoryError e) {
            throw new VerbsException(
                    "BufferPool.build",
                    org.verbs4j.natives.Errno.ENOMEM,
                    "the allocator (" + allocator.description() + ") could not allocate a region of " + bytes
                            + " bytes (" + e.getMessage() + ")",
                    "give the size classes fewer or smaller buffers");
        }
    }

    /** The region's memory as the buffers see it: scoped to the pool's view arena, which dies first on close. */
    private static MemorySegment view(RegionAllocator.Allocation a, Arena views) {
        // device memory: the buffers carry its addresses but refuse segment() (their region has no host view)
        return MemorySegment.ofAddress(a.address()).reinterpret(a.byteSize(), views, null);
    }

    private static MemoryRegion register(
            Registrar registrar, ProtectionDomain pd, RegionAllocator.Allocation a, Set<Access> access) {
        MemoryRegion mr = a.hostAccessible()
                ? registrar.register(pd, a.segment(), access)
                : registrar.registerDevice(pd, a.address(), a.byteSize(), access);
        if (mr == null
                || mr.address() != a.address()
                || mr.length() < a.byteSize()
                || mr.isHostAccessible() != a.hostAccessible()) {
            VerbsException e = new InvalidRequestException(
                    "Registrar.register",
                    "the registrar returned " + mr
                            + ", which does not cover the allocated " + (a.hostAccessible() ? "host" : "device")
                            + " region of " + a.byteSize() + " bytes at 0x" + Long.toHexString(a.address()));
            if (mr != null) {
                mr.close();
            }
            throw e;
        }
        return mr;
    }
}
