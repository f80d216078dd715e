package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.PrintStream;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * Remote atomics on an 8-byte, 8-aligned word of a peer's region: fetch-and-add and
 * compare-and-swap, each returning the OLD value into a local 8-byte buffer. Both grants are
 * needed: the peer's queue pair and its region allow {@code REMOTE_ATOMIC}.
 */
public final class Atomics {
    private static final int ADDS = 10;

    private Atomics() {}

    /** Runs the example; {@code examples/run atomics}. */
    public static void main(String[] args) {
        run(System.out);
    }

    /** Runs the example, printing what it proves to {@code out}. */
    public static void run(PrintStream out) {
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(32);
                CompletionQueue peerCq = ctx.createCompletionQueue(4);
                MemoryRegion counter = pd.allocateMemoryRegion(8, Access.LOCAL_WRITE, Access.REMOTE_ATOMIC);
                MemoryRegion results = pd.allocateMemoryRegion(8 * (ADDS + 2), Access.LOCAL_WRITE);
                QueuePair a = pd.createQueuePair(
                        QueuePairInit.of(QueuePairType.RC, cq).maxSendWr(ADDS + 2));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, peerCq));
                SendWorkRequests wrs = new SendWorkRequests(ADDS + 2, 1);
                WorkCompletions wcs = new WorkCompletions(ADDS + 2)) {
            if (!ctx.queryDevice().supportsAtomics()) {
                out.println("skipped: " + ctx.deviceName() + " has no atomics (atomic_cap = IBV_ATOMIC_NONE)");
                return;
            }
            Setup.connect(a, b, Setup.gid(ctx), Set.of(Access.REMOTE_ATOMIC));
            counter.segment().set(JAVA_LONG, 0, 1000);

            wrs.clear();
            for (int i = 0; i < ADDS; i++) {
                wrs.fetchAndAdd(i, counter.address(), counter.rkey(), 5)
                        .sge(results, 8L * i, 8)
                        .signaled();
            }
            a.postSend(wrs);
            Setup.await(cq, wcs, ADDS);
            StringBuilder olds = new StringBuilder();
            for (int i = 0; i < ADDS; i++) {
                long old = results.segment().get(JAVA_LONG, 8L * i);
                WriteAndRead.check(old == 1000 + 5L * i, "fetch-and-add " + i + " returned " + old);
                olds.append(i == 0 ? "" : ", ").append(old);
            }
            long now = counter.segment().get(JAVA_LONG, 0);
            WriteAndRead.check(now == 1050, "counter " + now);
            out.println("fetch-and-add +5, " + ADDS + " times: returned " + olds + "; counter now " + now);

            a.postSend(wrs.clear()
                    .compareAndSwap(100, counter.address(), counter.rkey(), 1050, 7)
                    .sge(results, 8L * ADDS, 8)
                    .signaled()
                    .compareAndSwap(101, counter.address(), counter.rkey(), 1050, 9)
                    .sge(results, 8L * ADDS + 8, 8)
                    .signaled());
            Setup.await(cq, wcs, 2);
            long first = results.segment().get(JAVA_LONG, 8L * ADDS);
            long second = results.segment().get(JAVA_LONG, 8L * ADDS + 8);
            now = counter.segment().get(JAVA_LONG, 0);
            WriteAndRead.check(first == 1050 && second == 7 && now == 7, "CAS: " + first + ", " + second + ", " + now);
            out.println("compare-and-swap 1050 -> 7: returned 1050 (matched, swapped)");
            out.println("compare-and-swap 1050 -> 9: returned 7 (no match, unchanged); counter now " + now);
        }
    }
}
