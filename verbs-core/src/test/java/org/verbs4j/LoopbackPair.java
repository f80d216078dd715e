package org.verbs4j;

import java.util.EnumSet;
import java.util.Set;

/**
 * Test fixture: two queue pairs of one type on one device (Soft-RoCE loopback works on a single
 * rxe device), connected to each other, each with its own completion queue. Closes everything
 * it created, in reverse order.
 */
public final class LoopbackPair implements AutoCloseable {
    public final Context context;
    public final ProtectionDomain pd;
    public final CompletionQueue cqA;
    public final CompletionQueue cqB;
    public final QueuePair a;
    public final QueuePair b;
    public final GidEntry gid;
    public final ConnectOptions options;

    private LoopbackPair(
            Context context,
            ProtectionDomain pd,
            CompletionQueue cqA,
            CompletionQueue cqB,
            QueuePair a,
            QueuePair b,
            GidEntry gid,
            ConnectOptions options) {
        this.context = context;
        this.pd = pd;
        this.cqA = cqA;
        this.cqB = cqB;
        this.a = a;
        this.b = b;
        this.gid = gid;
        this.options = options;
    }

    /** The device the tests use: $VERBS4J_DEVICE, else the first one. */
    public static Context openTestDevice() {
        String name = System.getenv("VERBS4J_DEVICE");
        return name == null || name.isEmpty() ? Verbs.openFirst() : Verbs.open(name);
    }

    /** An RC pair granting each other remote read, write and atomics. */
    public static LoopbackPair rc() {
        return open(
                QueuePairType.RC,
                EnumSet.of(Access.REMOTE_READ, Access.REMOTE_WRITE, Access.REMOTE_ATOMIC),
                init -> init);
    }

    /** A pair of {@code type}, customised by {@code shape}. */
    public static LoopbackPair open(
            QueuePairType type, Set<Access> remoteAccess, java.util.function.UnaryOperator<QueuePairInit> shape) {
        return open(type, remoteAccess, shape, o -> o);
    }

    /** A pair of {@code type}, customised by {@code shape}, connected with {@code options} applied to the defaults. */
    public static LoopbackPair open(
            QueuePairType type,
            Set<Access> remoteAccess,
            java.util.function.UnaryOperator<QueuePairInit> shape,
            java.util.function.UnaryOperator<ConnectOptions> options) {
        Context ctx = openTestDevice();
        ProtectionDomain pd = null;
        CompletionQueue cqA = null;
        CompletionQueue cqB = null;
        QueuePair a = null;
        QueuePair b = null;
        try {
            pd = ctx.allocateProtectionDomain();
            cqA = ctx.createCompletionQueue(256);
            cqB = ctx.createCompletionQueue(256);
            a = pd.createQueuePair(shape.apply(QueuePairInit.of(type, cqA)));
            b = pd.createQueuePair(shape.apply(QueuePairInit.of(type, cqB)));
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1)
                    .orElseThrow(
                            () -> new IllegalStateException("no RoCE v2 IPv4 GID on port 1 of " + ctx.deviceName()));
            ConnectOptions o = options.apply(ConnectOptions.roce(gid.index()));
            GuestSupport.connect(a, b, gid, remoteAccess, o);
            return new LoopbackPair(ctx, pd, cqA, cqB, a, b, gid, o);
        } catch (RuntimeException e) {
            for (AutoCloseable c : new AutoCloseable[] {b, a, cqB, cqA, pd, ctx}) {
                if (c != null) {
                    try {
                        c.close();
                    } catch (Exception suppressed) {
                        e.addSuppressed(suppressed);
                    }
                }
            }
            throw e;
        }
    }

    @Override
    public void close() {
        b.close();
        a.close();
        cqB.close();
        cqA.close();
        pd.close();
        context.close();
    }
}
