package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.ExtendedPostVerbs;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.QueuePairExLayout;
import org.verbs4j.natives.XrcVerbs;

/**
 * An XRC domain ({@code struct ibv_xrcd}, {@code ibv_open_xrcd}): the scope of XRC shared
 * receive queues ({@link ProtectionDomain#createXrcSharedReceiveQueue}) and of the receiving ends
 * of XRC connections ({@link #createReceiveQueuePair}). A sender's {@link QueuePairType#XRC_SEND}
 * queue pair reaches any XRC SRQ of the domain its peer's XRC_RECV queue pair belongs to, naming
 * the SRQ by number ({@link SendWorkRequests#remoteSrqNumber}). Opened anonymously, or on a file
 * that names the same domain in every process that opens it. Where the device has no XRC (rxe,
 * siw) opening is refused with the reason; {@link Context#capabilities()} reports it, probed.
 *
 * <p>Owned by its {@link Context}; refuses to close (EBUSY) while an SRQ or queue pair uses it.
 * Thread-safe (control path).
 */
public final class XrcDomain extends NativeResource {
    /** What a device without XRC lacks. */
    static final String NO_XRC = "device_cap_flags has no IBV_DEVICE_XRC";
    /** What a provider that claims XRC but refuses the domain lacks. */
    static final String NO_OPEN_XRCD = "its provider does not implement open_xrcd";

    private final Context context;

    XrcDomain(Context context, MemorySegment xrcd, Destroyer destroy) {
        super(context, "XRC domain", "ibv_close_xrcd", xrcd.reinterpret(XrcVerbs.XRCD_SIZE), destroy, null);
        this.context = context;
    }

    /** {@code ibv_open_xrcd} on {@code ctx}: anonymous ({@code file} null) or named by {@code file}. */
    static XrcDomain open(Context ctx, Path file, Destroyer destroy) {
        String verb = "ibv_open_xrcd";
        ctx.pin(verb);
        try {
            int fd = file == null ? -1 : XrcVerbs.openFile(verb, file.toString());
            try {
                return new XrcDomain(ctx, XrcVerbs.openXrcd(ctx.handle, fd), destroy);
            } catch (VerbsException e) {
                throw refusal(ctx, e);
            } finally {
                if (fd >= 0) {
                    LibC.close(fd); // the domain holds the file's inode, not the fd
                }
            }
        } finally {
            ctx.unpin();
        }
    }

    /** The provider's refusal of {@code ibv_open_xrcd}, with what is missing (EOPNOTSUPP) or what to do. */
    private static VerbsException refusal(Context ctx, VerbsException e) {
        if (e.errno() == Errno.EOPNOTSUPP || e.errno() == Errno.ENOSYS) {
            return VerbsException.create(
                    e.verb(),
                    e.errno(),
                    ctx.deviceName() + " offers no XRC: " + (Capabilities.hasXrcFlag(ctx) ? NO_OPEN_XRCD : NO_XRC),
                    "connect a queue pair per peer (RC) with a shared receive queue, "
                            + "or use a device whose driver implements XRC (e.g. mlx5)");
        }
        return VerbsException.create(
                e.verb(),
                e.errno(),
                "the provider of " + ctx.deviceName() + " refused an XRC domain",
                "close the XRC domains no longer used; for a shared domain pass a file this user may create or read");
    }

    /** The context it was opened on. */
    public Context context() {
        return context;
    }

    /**
     * The raw {@code struct ibv_xrcd *}: restricted to modules with native access; the view stops
     * working when the domain closes.
     */
    public MemorySegment handle() {
        return rawHandle("XrcDomain.handle");
    }

    /**
     * {@code ibv_create_qp_ex} of an {@link QueuePairType#XRC_RECV} queue pair: the receiving end
     * of XRC connections, with no protection domain, no completion queues and no queues of its
     * own (what arrives goes to the XRC SRQ each send names). Created in RESET.
     */
    public XrcReceiveQueuePair createReceiveQueuePair() {
        return createReceiveQueuePair(LibIbverbs::destroyQp);
    }

    /** An XRC_RECV queue pair released by {@code destroy} (a test's stand-in). */
    XrcReceiveQueuePair createReceiveQueuePair(Destroyer destroy) {
        String verb = "ibv_create_qp_ex";
        pin(verb);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(QueuePairExLayout.INIT_EX_SIZE, 8);
            a.set(java.lang.foreign.ValueLayout.JAVA_INT, QueuePairExLayout.INIT_COMP_MASK, XrcVerbs.QP_INIT_ATTR_XRCD);
            a.set(java.lang.foreign.ValueLayout.ADDRESS, XrcVerbs.QP_INIT_XRCD, handle);
            a.set(java.lang.foreign.ValueLayout.JAVA_INT, XrcVerbs.QP_INIT_QP_TYPE, XrcVerbs.QPT_XRC_RECV);
            MemorySegment qp = ExtendedPostVerbs.createQpEx(context.handle, a);
            return new XrcReceiveQueuePair(this, qp.reinterpret(ObjectLayout.QP_SIZE), destroy);
        } finally {
            unpin();
        }
    }

    /**
     * {@code ibv_open_qp}: a handle on this domain's XRC_RECV queue pair number {@code qpNumber},
     * made by another process that shares the domain (opened on the same file) or by this one, so
     * that the queue pair outlives its creator: it lives while any process holds a handle. The
     * handle's {@link XrcReceiveQueuePair#state()} starts at RESET whatever the creator did with
     * it; closing the handle ({@code ibv_destroy_qp}) releases this process's hold only. Refused
     * with EINVAL by the kernel for a number no XRC_RECV queue pair of the domain has.
     */
    public XrcReceiveQueuePair openReceiveQueuePair(int qpNumber) {
        return openReceiveQueuePair(qpNumber, LibIbverbs::destroyQp);
    }

    /** An opened XRC_RECV handle released by {@code destroy} (a test's stand-in). */
    XrcReceiveQueuePair openReceiveQueuePair(int qpNumber, Destroyer destroy) {
        String verb = "ibv_open_qp";
        pin(verb);
        try {
            MemorySegment qp = XrcVerbs.openQp(context.handle, handle, qpNumber);
            return new XrcReceiveQueuePair(this, qp.reinterpret(ObjectLayout.QP_SIZE), destroy);
        } catch (VerbsException e) {
            throw VerbsException.create(
                    verb,
                    e.errno(),
                    "XRC_RECV queue pair " + qpNumber + " of " + describe() + " could not be opened",
                    "open the number the creating process's XrcReceiveQueuePair.qpNumber() gives, on a domain opened"
                            + " on the same file");
        } finally {
            unpin();
        }
    }

    @Override
    String describe() {
        return "XrcDomain on " + device();
    }
}
