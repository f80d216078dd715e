package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.io.PrintStream;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PoolMetrics;
import org.verbs4j.pool.PoolWorkRequests;
import org.verbs4j.pool.PooledBuffer;

/**
 * The registered buffer pool: memory is registered once, when the pool is built; after that a
 * buffer for a work request is leased and released (about 350 ns) instead of registered and
 * deregistered (about 190 µs on rxe). 1,000 RDMA WRITEs, each from a freshly leased buffer into
 * another, and the registration count never moves.
 */
public final class PooledBuffers {

    private PooledBuffers() {}

    /** Runs the example; {@code examples/run pool}. */
    public static void main(String[] args) {
        run(System.out, args.length > 0 ? Integer.parseInt(args[0]) : 1000);
    }

    /** Runs the example with {@code rounds} writes, printing what it proves to {@code out}. */
    public static void run(PrintStream out, int rounds) {
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(16);
                CompletionQueue peerCq = ctx.createCompletionQueue(4);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, peerCq));
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                BufferPool pool = BufferPool.builder(pd)
                        .sizeClass(4096, 16)
                        .sizeClass(65536, 4)
                        .access(Access.LOCAL_WRITE, Access.REMOTE_WRITE)
                        .build()) {
            Setup.connect(a, b, Setup.gid(ctx), Set.of(Access.REMOTE_WRITE));
            long registrations = pool.registrations();
            out.println(pool + ": " + registrations + " registration(s) at build time");
            for (int i = 0; i < rounds; i++) {
                // try-with-resources releases the leases; the write's completion is awaited inside
                try (PooledBuffer src = pool.lease(1000 + i);
                        PooledBuffer dst = pool.lease(1000 + i)) {
                    src.segment().set(JAVA_INT, 0, i);
                    PoolWorkRequests.sge(PoolWorkRequests.write(wrs.clear(), i, dst), src, 1000 + i)
                            .signaled();
                    a.postSend(wrs);
                    Setup.await(cq, wcs, 1);
                    WriteAndRead.check(dst.segment().get(JAVA_INT, 0) == i, "round " + i + ": the data did not arrive");
                }
            }
            PoolMetrics m = pool.metrics();
            WriteAndRead.check(pool.registrations() == registrations, "the pool registered memory again");
            WriteAndRead.check(pool.outstandingLeases().isEmpty(), "leases outstanding");
            out.println(rounds + " RDMA WRITEs between leased buffers, each verified; leases: " + m.leases()
                    + "; registrations still " + pool.registrations() + "; outstanding leases: 0");
        }
    }
}
