package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.DomainVerbs;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;

/**
 * A thread domain ({@code struct ibv_td}, {@code ibv_alloc_td}): the application's promise that
 * the objects of a parent domain made with it ({@link #allocateParentDomain}) are used by one
 * thread at a time, which lets the provider drop its own locks on them (mlx5 gives the domain a
 * doorbell of its own). A parent domain is a {@link ProtectionDomain}: queue pairs created on it
 * ({@link ProtectionDomain#createQueuePair}, {@link ProtectionDomain#createExtendedQueuePair})
 * belong to the thread domain. Where the provider has no thread domains (rxe, siw) allocation is
 * refused with EOPNOTSUPP; {@link Context#capabilities()} reports it, probed.
 *
 * <p>Owned by its {@link Context}; refuses to close (EBUSY) while a parent domain made with it is
 * open. Thread-safe (control path); keeping the promise on the data path is the caller's part.
 */
public final class ThreadDomain extends NativeResource {
    /** What a provider without thread domains lacks. */
    static final String NO_TD = "the provider has no alloc_td op";

    private final Context context;

    ThreadDomain(Context context, MemorySegment td, Destroyer destroy) {
        super(context, "thread domain", "ibv_dealloc_td", td.reinterpret(8), destroy, null);
        this.context = context;
    }

    /** {@code ibv_alloc_td} on {@code ctx}; EOPNOTSUPP, naming what is missing, where the provider has none. */
    static ThreadDomain allocate(Context ctx) {
        String verb = "ibv_alloc_td";
        ctx.pin(verb);
        try {
            return new ThreadDomain(ctx, DomainVerbs.allocTd(ctx.handle), DomainVerbs::deallocTd);
        } catch (VerbsException e) {
            throw refusal(ctx, verb, e, "a thread domain");
        } finally {
            ctx.unpin();
        }
    }

    /** The provider's refusal of {@code verb}, with what is missing (EOPNOTSUPP) or what to do. */
    private static VerbsException refusal(Context ctx, String verb, VerbsException e, String what) {
        if (e.errno() == Errno.EOPNOTSUPP) {
            return VerbsException.create(
                    verb,
                    e.errno(),
                    ctx.deviceName() + " offers no thread domains: "
                            + (verb.equals("ibv_alloc_td") ? NO_TD : "the provider has no alloc_parent_domain op"),
                    "use the protection domain itself (the provider then locks its queues), "
                            + "or a device whose driver implements thread domains (e.g. mlx5)");
        }
        return VerbsException.create(
                verb,
                e.errno(),
                "the provider of " + ctx.deviceName() + " refused " + what,
                "close the thread and parent domains no longer used (ENOMEM: the device has no more of them)");
    }

    /** The context it was allocated on. */
    public Context context() {
        return context;
    }

    /**
     * {@code ibv_alloc_parent_domain}: a protection domain that stands for {@code pd} with this
     * thread domain. Regions registered on {@code pd} serve its queue pairs; {@code pd} and this
     * thread domain refuse to close (EBUSY) while it is open. Its {@link ProtectionDomain#close}
     * is {@code ibv_dealloc_pd}.
     */
    public ProtectionDomain allocateParentDomain(ProtectionDomain pd) {
        return allocateParentDomain(pd, LibIbverbs::deallocPd);
    }

    /** A parent domain released by {@code dealloc} (a test's stand-in). */
    ProtectionDomain allocateParentDomain(ProtectionDomain pd, Destroyer dealloc) {
        String verb = "ibv_alloc_parent_domain";
        if (pd == null) {
            throw new InvalidRequestException(
                    verb, "the protection domain is null", "pass the PD the domain stands for");
        }
        pd.requireContext(verb, context, "thread domain", "allocate both on the same context");
        if (pd.threadDomain() != null) {
            throw new InvalidRequestException(
                    verb, pd.describe() + " is itself a parent domain", "pass the protection domain it stands for");
        }
        NativeResource.pinAll(verb, this, pd);
        try {
            MemorySegment parent;
            try {
                parent = DomainVerbs.allocParentDomain(context.handle, pd.handle, handle);
            } catch (VerbsException e) {
                throw refusal(context, verb, e, "a parent domain for " + pd.describe());
            }
            return new ProtectionDomain(pd, this, parent, dealloc);
        } finally {
            NativeResource.unpinAll(this, pd);
        }
    }
}
