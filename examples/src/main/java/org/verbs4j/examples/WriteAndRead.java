package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.Context;
import org.verbs4j.GidEntry;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * One-sided RDMA in one process: queue pair A writes 4 KiB into B's memory region and reads it
 * back into its own, with no receive posted and no CPU on B's side; then a region registered
 * WITHOUT remote write shows that the queue pair's grant alone is not enough.
 *
 * <p>Both queue pairs live on one device and are connected to each other (loopback), which is
 * exactly what two machines do, minus the out-of-band exchange ({@link PingPong} shows that).
 */
public final class WriteAndRead {
    private static final int SIZE = 4096;

    private WriteAndRead() {}

    /** Runs the example; {@code examples/run write-read}. */
    public static void main(String[] args) {
        run(System.out);
    }

    /** Runs the example, printing what it proves to {@code out}. */
    public static void run(PrintStream out) {
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cqA = ctx.createCompletionQueue(16);
                CompletionQueue cqB = ctx.createCompletionQueue(16);
                // A's region: the local end of the WRITE (read by the device) and of the READ (written
                // by the device: LOCAL_WRITE)
                MemoryRegion mine = pd.allocateMemoryRegion(2 * SIZE, Access.LOCAL_WRITE);
                // B's region: the remote end. Grant 1 of 2: the REGION allows remote write and read.
                MemoryRegion theirs =
                        pd.allocateMemoryRegion(SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqA));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqB));
                SendWorkRequests wrs = new SendWorkRequests(4, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            out.println("device " + ctx.deviceName() + ": " + a + ", " + b);

            // Connect A and B: each side's endpoint (QP number, PSN, GID, MTU) goes to the other,
            // then RESET -> INIT -> RTR -> RTS. Grant 2 of 2: the QUEUE PAIR B lets its peer write
            // and read (toInit's remote access); A grants nothing.
            GidEntry gid = Setup.gid(ctx);
            ConnectOptions options = ConnectOptions.roce(gid.index());
            QueuePairEndpoint ea = a.localEndpoint(gid.index(), 100);
            QueuePairEndpoint eb = b.localEndpoint(gid.index(), 200);
            a.connect(1, Set.of(), ea, eb, options);
            b.connect(1, Set.of(Access.REMOTE_WRITE, Access.REMOTE_READ), eb, ea, options);
            out.println("connected through GID index " + gid.index() + " (" + gid.gid() + ", " + gid.type() + "): "
                    + a.state() + ", " + b.state());

            // RDMA WRITE: A's first 4 KiB -> B's region. Only A sees a completion.
            MemorySegment src = mine.segment().asSlice(0, SIZE);
            for (int i = 0; i < SIZE; i++) {
                src.set(JAVA_BYTE, i, (byte) (i * 7 + 3));
            }
            a.postSend(wrs.clear()
                    .write(1, theirs.address(), theirs.rkey())
                    .sge(mine, 0, SIZE)
                    .signaled());
            Setup.await(cqA, wcs, 1);
            check(src.mismatch(theirs.segment()) == -1, "the written bytes differ");
            out.println("RDMA WRITE: " + SIZE + " bytes from A landed in B's region (rkey 0x"
                    + Integer.toHexString(theirs.rkey()) + "), verified byte for byte; B posted nothing");

            // RDMA READ: B's region -> A's second 4 KiB.
            a.postSend(wrs.clear()
                    .read(2, theirs.address(), theirs.rkey())
                    .sge(mine, SIZE, SIZE)
                    .signaled());
            Setup.await(cqA, wcs, 1);
            check(wcs.byteLength(0) == SIZE, "READ completion length " + wcs.byteLength(0));
            check(mine.segment().asSlice(SIZE, SIZE).mismatch(theirs.segment()) == -1, "the read bytes differ");
            out.println("RDMA READ: " + SIZE + " bytes from B's region into A's, verified byte for byte");
            check(cqB.poll(wcs) == 0, "B saw a completion");
            out.println("B's completion queue is empty: one-sided operations involve only the requester");

            // The second grant: a region without REMOTE_WRITE refuses the write although the QP allows it.
            try (MemoryRegion closedDoor = pd.allocateMemoryRegion(SIZE, Access.LOCAL_WRITE)) {
                a.postSend(wrs.clear()
                        .write(3, closedDoor.address(), closedDoor.rkey())
                        .sge(mine, 0, 64)
                        .signaled());
                int n = cqA.poll(wcs, 1, Setup.WAIT);
                check(n == 1 && !wcs.isSuccess(0), "a write into a region without REMOTE_WRITE succeeded");
                out.println("RDMA WRITE into a region registered without REMOTE_WRITE: " + wcs.statusText(0)
                        + "; A is now " + a.query().state() + " (an error completion ends an RC connection)");
            }
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }
}
