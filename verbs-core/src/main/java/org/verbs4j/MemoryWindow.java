package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.natives.ExtendedPostVerbs;
import org.verbs4j.natives.QueuePairExLayout;

/**
 * A memory window ({@code struct ibv_mw}): a range of a registered region granted to a peer under
 * an rkey of its own, bound and invalidated through the send queue without re-registering. A type 2
 * window is bound by a work request ({@link SendWorkRequests#bindWindow}, posted classic or
 * extended) and revoked by {@link SendWorkRequests#localInvalidate} or by the peer's
 * {@link SendWorkRequests#sendWithInvalidate}; after that the device refuses its old rkey with a
 * remote access error. A type 1 window is bound with {@code ibv_bind_mw} ({@link #bind}) and revoked
 * by a bind of length 0 ({@link #unbind}) or by its close; both go through a queue pair's send
 * queue like a posted request (its gate, checks and accounting; a BIND_MW completion when
 * signaled).
 *
 * <p>Owned by its protection domain (which refuses to close while the window is open). A region a
 * window was bound to refuses to close while the window is open (the device may still write
 * through it); closing the window releases it. Thread-safe.
 */
public final class MemoryWindow extends NativeResource {
    /** {@code enum ibv_mw_type}. */
    public enum Type {
        /** Bound with {@code ibv_bind_mw} ({@link MemoryWindow#bind}), revoked by {@link MemoryWindow#unbind}. */
        TYPE_1(QueuePairExLayout.MW_TYPE_1),
        /** Bound by a work request on a queue pair of the same protection domain. */
        TYPE_2(QueuePairExLayout.MW_TYPE_2);

        final int value;

        Type(int value) {
            this.value = value;
        }

        /** The {@code IBV_MW_TYPE_*} value. */
        int value() {
            return value;
        }
    }

    /** The region the window was last bound to (pinned until the window closes or is bound again). */
    private static final class Binding {
        private MemoryRegion region;
        /** Type 1: the {@code struct ibv_mw_bind} and the one-request chain standing for a bind (made at the first). */
        private MemorySegment args;

        private SendWorkRequests record;

        synchronized void bind(MemoryRegion mr, String verb) {
            if (region != mr) {
                mr.pin(verb);
                if (region != null) {
                    region.unpin();
                }
                region = mr;
            }
        }

        synchronized void release() {
            if (region != null) {
                region.unpin();
                region = null;
            }
        }

        synchronized void close() {
            release();
            if (record != null) {
                record.close();
            }
        }
    }

    /**
     * {@code struct ibv_mw_bind} (verbs.h, 48 bytes): {@code wr_id}, {@code send_flags}, then the
     * {@code ibv_mw_bind_info}: {@code mr}, {@code addr}, {@code length}, {@code mw_access_flags}.
     */
    private static final long BIND_WR_ID = 0,
            BIND_SEND_FLAGS = 8,
            BIND_MR = 16,
            BIND_ADDR = 24,
            BIND_LENGTH = 32,
            BIND_ACCESS = 40,
            BIND_SIZE = 48;

    final ProtectionDomain pd;
    final long address;
    private final Type type;
    private final Binding binding;
    private volatile int rkey;

    MemoryWindow(ProtectionDomain pd, MemorySegment mw, Type type, Destroyer destroy) {
        this(pd, mw.reinterpret(QueuePairExLayout.MW_SIZE), type, destroy, new Binding());
    }

    private MemoryWindow(ProtectionDomain pd, MemorySegment mw, Type type, Destroyer destroy, Binding b) {
        super(
                pd,
                "memory window",
                "ibv_dealloc_mw",
                mw,
                h -> {
                    Revocations.revoke(); // a chain that names the window is refused from now on
                    destroy.destroy(h);
                    b.close();
                },
                null);
        this.pd = pd;
        this.address = mw.address();
        this.type = type;
        this.binding = b;
        this.rkey = mw.get(JAVA_INT, QueuePairExLayout.MW_RKEY);
    }

    /** Type 1 or type 2. */
    public Type type() {
        return type;
    }

    /**
     * The rkey a peer uses: after {@link SendWorkRequests#bindWindow}, the rkey of that bind (valid
     * once the bind completed); before any bind, the rkey the device allocated the window with.
     */
    public int rkey() {
        return rkey;
    }

    /** The protection domain the window was allocated in. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /**
     * A bind of this window to {@code mr} is being added to a chain: the region is pinned (refuses
     * to close) until the window closes or is bound to another region, and the window's rkey moves
     * on to the bind's ({@code ibv_inc_rkey}: the low 8 bits, the key, count up). Returns that rkey.
     */
    int nextBind(MemoryRegion mr, String verb) {
        pin(verb); // the native window stays allocated while its rkey is written
        try {
            binding.bind(mr, verb);
            int old = rkey;
            int next = (old & 0xffffff00) | ((old + 1) & 0xff);
            // the provider names the window to the device by ibv_mw.rkey, which must be the key the
            // device holds now (the last bind's) when this bind is posted; as C code sets mw->rkey
            // after each bind (mlx5's and rxe's ibv_bind_mw do)
            handle.set(JAVA_INT, QueuePairExLayout.MW_RKEY, old);
            rkey = next;
            return next;
        } finally {
            unpin();
        }
    }

    /**
     * {@code ibv_bind_mw}: binds this type 1 window to {@code [offset, offset + length)} of
     * {@code mr}, granting {@code access} (remote rights the region has), through {@code qp}'s send
     * queue (an RC or UC queue pair of the window's protection domain, in RTS): one request, with
     * the gate, checks and accounting of a post, completing as BIND_MW when {@code signaled}. The
     * region refuses to close while the window is bound to it. Returns the window's new rkey
     * (valid once the bind completed; a peer's access under it lands in the range). A bind that
     * completes with an error leaves the window's key out of step with the device: close the
     * window then.
     */
    public int bind(
            QueuePair qp, long wrId, MemoryRegion mr, long offset, long length, Set<Access> access, boolean signaled) {
        String verb = "ibv_bind_mw";
        checkType1(verb, qp);
        if (!mr.isOpenPlain()) {
            throw mr.closedException(verb);
        }
        if (mr.handle.equals(MemorySegment.NULL)) {
            throw new InvalidRequestException(
                    verb,
                    mr.describe() + " wraps memory registered elsewhere: verbs4j has no struct ibv_mr of it, "
                            + "which the provider reads",
                    "bind to a region registered through verbs4j (ProtectionDomain.register or allocateMemoryRegion)");
        }
        SendWorkRequests.checkWindowRange(verb, this, mr, offset, length, access);
        return post(verb, qp, wrId, mr, mr.address() + offset, length, Access.mask(access), signaled);
    }

    /**
     * A bind of length 0 ({@code ibv_bind_mw}, through {@code qp} as {@link #bind}): the window
     * grants nothing from then on, the device refuses its earlier rkey (remote access error) and
     * the region it was bound to may close. Returns the window's new rkey.
     */
    public int unbind(QueuePair qp, long wrId, boolean signaled) {
        String verb = "ibv_bind_mw";
        checkType1(verb, qp);
        MemoryRegion mr;
        synchronized (binding) {
            mr = binding.region;
        }
        if (mr == null) {
            throw new InvalidRequestException(
                    verb, describe() + " is not bound to a region", "bind it first; an unbound window grants nothing");
        }
        // the region is named even with length 0: rxe (rdma-core 44) reads its lkey
        return post(verb, qp, wrId, mr, 0, 0, 0, signaled);
    }

    private void checkType1(String verb, QueuePair qp) {
        if (type != Type.TYPE_1) {
            throw new InvalidRequestException(
                    verb,
                    "a type 2 window is bound by a work request, not with ibv_bind_mw",
                    "add SendWorkRequests.bindWindow to a chain and post it, or allocate the window as TYPE_1");
        }
        if (qp.type() != QueuePairType.RC && qp.type() != QueuePairType.UC) {
            throw new InvalidRequestException(
                    verb,
                    "windows are bound through RC or UC queue pairs, not " + qp.type(),
                    "bind through an RC (or UC) queue pair of the window's protection domain");
        }
        if (qp.pd != pd) {
            throw VerbsException.create(
                    verb,
                    org.verbs4j.natives.Errno.EPERM,
                    "the queue pair and the window belong to different protection domains",
                    "bind through a queue pair of the window's protection domain");
        }
    }

    /** One bind (length 0: the unbind) through the provider's bind_mw op; the window's new rkey. */
    private int post(
            String verb,
            QueuePair qp,
            long wrId,
            MemoryRegion mr,
            long addr,
            long length,
            int access,
            boolean signaled) {
        pin(verb); // the native window stays allocated during the call
        try {
            mr.pin(verb); // and the region registered
            try {
                synchronized (binding) {
                    Binding b = binding;
                    if (b.args == null) {
                        b.args = Arena.ofAuto().allocate(BIND_SIZE, 8);
                        b.record = new SendWorkRequests(1, 1);
                    }
                    MemorySegment a = b.args;
                    a.set(JAVA_LONG, BIND_WR_ID, wrId);
                    a.set(JAVA_INT, BIND_SEND_FLAGS, signaled ? SendWorkRequests.FLAG_SIGNALED : 0);
                    a.set(ADDRESS, BIND_MR, mr.handle);
                    a.set(JAVA_LONG, BIND_ADDR, addr);
                    a.set(JAVA_LONG, BIND_LENGTH, length);
                    a.set(JAVA_INT, BIND_ACCESS, access);
                    b.record.clear().send(wrId);
                    if (signaled) {
                        b.record.signaled();
                    }
                    MemorySegment ctx = pd.context().handle;
                    handle.set(JAVA_INT, QueuePairExLayout.MW_RKEY, rkey); // the key the device holds now
                    qp.postThrough(verb, b.record, () -> ExtendedPostVerbs.bindMw(ctx, qp.handle, handle, a));
                    rkey = handle.get(JAVA_INT, QueuePairExLayout.MW_RKEY); // the provider moved it on
                    if (length == 0) {
                        b.release();
                    } else {
                        b.bind(mr, verb);
                    }
                    return rkey;
                }
            } finally {
                mr.unpin();
            }
        } finally {
            unpin();
        }
    }

    /** The raw {@code struct ibv_mw *}: restricted to modules with native access; stops working when the window closes. */
    public MemorySegment handle() {
        return rawHandle("MemoryWindow.handle");
    }

    @Override
    String describe() {
        return "MemoryWindow " + type + " rkey 0x" + Integer.toHexString(rkey) + " on " + device();
    }
}
