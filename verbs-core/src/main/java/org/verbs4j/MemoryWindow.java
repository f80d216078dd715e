package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.QueuePairExLayout;

/**
 * A memory window ({@code struct ibv_mw}): a range of a registered region granted to a peer under
 * an rkey of its own, bound and invalidated through the send queue without re-registering. A type 2
 * window is bound by a work request ({@link SendWorkRequests#bindWindow}, posted classic or
 * extended) and revoked by {@link SendWorkRequests#localInvalidate} or by the peer's
 * {@link SendWorkRequests#sendWithInvalidate}; after that the device refuses its old rkey with a
 * remote access error.
 *
 * <p>Owned by its protection domain (which refuses to close while the window is open). A region a
 * window was bound to refuses to close while the window is open (the device may still write
 * through it); closing the window releases it. Thread-safe.
 */
public final class MemoryWindow extends NativeResource {
    /** {@code enum ibv_mw_type}. */
    public enum Type {
        /** Bound with {@code ibv_bind_mw}; not wrapped by this library (allocation only). */
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
    }

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
                    b.release();
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

    /** The raw {@code struct ibv_mw *}: restricted to modules with native access; stops working when the window closes. */
    public MemorySegment handle() {
        return rawHandle("MemoryWindow.handle");
    }

    @Override
    String describe() {
        return "MemoryWindow " + type + " rkey 0x" + Integer.toHexString(rkey) + " on " + device();
    }
}
