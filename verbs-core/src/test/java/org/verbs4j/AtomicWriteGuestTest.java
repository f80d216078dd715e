package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.verbs4j.CapabilityReport.Feature;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): RDMA ATOMIC WRITE ({@code ibv_wr_atomic_write}) and the capability rows of
 * the operations rxe gained in Linux 6.2. Where the device has the capability (rxe on the 6.12
 * guest, {@code VERBS4J_GUEST_KERNEL=6.12}), 8 bytes land in a peer's region in one piece, the
 * bytes around them untouched, with an {@code IBV_WC_ATOMIC_WRITE} completion; a region without
 * REMOTE_WRITE gets a remote access error and keeps its bytes. Where it has not (rxe on 6.1), the
 * queue pair is refused at creation with the reason. On rxe the kernel's version says which of
 * the two must happen, so neither branch can pass in place of the other.
 */
@RdmaTest
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AtomicWriteGuestTest {
    private static final int SIZE = 64;
    private static final long AT = 16;
    private static final long VALUE = 0x1122334455667788L;
    private static final byte FILL = (byte) 0xA5;

    private Context ctx;
    private ProtectionDomain pd;
    private Arena arena;
    private GidEntry gid;
    private CapabilityReport caps;

    @BeforeAll
    void open() {
        ctx = LoopbackPair.openTestDevice();
        pd = ctx.allocateProtectionDomain();
        arena = Arena.ofShared();
        gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
        caps = ctx.capabilities();
        // the whole report in the log: the CI step on the 6.12 guest shows it for rxe0
        System.out.print("[atomic write] kernel " + System.getProperty("os.version") + ", " + caps.format());
    }

    @AfterAll
    void close() {
        GuestSupport.closeAll(pd, ctx, arena);
    }

    /** On rxe: whether the kernel is 6.2 or later (rxe has atomic write and flush from 6.2), else null. */
    private Boolean rxeFrom62() {
        if (!ctx.providerName().filter("rxe"::equals).isPresent()) {
            return null;
        }
        Matcher m = Pattern.compile("^(\\d+)\\.(\\d+)").matcher(System.getProperty("os.version"));
        assertTrue(m.find(), System.getProperty("os.version"));
        int major = Integer.parseInt(m.group(1));
        int minor = Integer.parseInt(m.group(2));
        return major > 6 || (major == 6 && minor >= 2);
    }

    private boolean hasAtomicWrite() {
        Feature f = caps.feature("atomic write").orElseThrow();
        Boolean expected = rxeFrom62();
        if (expected != null) {
            assertEquals(expected, f.supported(), "rxe on " + System.getProperty("os.version") + ": " + f);
        }
        return f.supported();
    }

    @Test
    void theReportSaysWhyFlushIsNotOffered() {
        Feature flush = caps.feature("flush").orElseThrow();
        assertFalse(flush.supported(), flush.toString());
        Boolean from62 = rxeFrom62();
        if (from62 != null) {
            assertTrue(
                    flush.detail()
                            .contains(
                                    from62
                                            ? "the device has IB_UVERBS_DEVICE_FLUSH_GLOBAL"
                                                    + " IB_UVERBS_DEVICE_FLUSH_PERSISTENT, but verbs4j binds"
                                                    + " rdma-core 44"
                                            : "lacks IB_UVERBS_DEVICE_FLUSH_GLOBAL"),
                    flush.toString());
        }
    }

    @Test
    void atomicWriteLandsEightBytesOrIsRefusedWithTheMissingCapability() {
        if (!hasAtomicWrite()) {
            try (CompletionQueue cq = ctx.createCompletionQueue(4)) {
                refused(
                        "ibv_create_qp_ex",
                        Errno.EOPNOTSUPP,
                        () -> pd.createExtendedQueuePair(
                                QueuePairInit.of(QueuePairType.RC, cq),
                                EnumSet.of(SendOperation.RDMA_WRITE, SendOperation.ATOMIC_WRITE)),
                        ctx.deviceName() + " has no RDMA ATOMIC WRITE",
                        "device_cap_flags_ex lacks IB_UVERBS_DEVICE_ATOMIC_WRITE");
                assertTrue(
                        caps.feature("atomic write").orElseThrow().detail().contains("IB_UVERBS_DEVICE_ATOMIC_WRITE"));
            }
            return;
        }
        MemorySegment target = arena.allocate(SIZE, 4096);
        target.fill(FILL);
        int status = writeInto(target, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE), 1);
        assertEquals(CompletionStatus.SUCCESS, status);
        assertEquals(VALUE, target.get(ValueLayout.JAVA_LONG_UNALIGNED, AT), "the 8 bytes written");
        for (long i = 0; i < SIZE; i++) {
            if (i < AT || i >= AT + 8) {
                assertEquals(FILL, target.get(ValueLayout.JAVA_BYTE, i), "byte " + i + " around the target");
            }
        }
    }

    @Test
    void aRegionWithoutRemoteWriteRefusesTheAtomicWriteAndKeepsItsBytes() {
        if (!hasAtomicWrite()) {
            return; // the refusal at creation is the other test's
        }
        MemorySegment target = arena.allocate(SIZE, 4096);
        target.fill(FILL);
        int status = writeInto(target, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ), 2);
        assertNotEquals(CompletionStatus.SUCCESS, status);
        assertEquals(CompletionStatus.REM_ACCESS_ERR, status, "a remote access error");
        GuestSupport.assertAll(target, FILL, "the region without REMOTE_WRITE");
    }

    @Test
    void flushRightsRegisterOrAreRefusedWithTheMissingCapability() {
        MemorySegment m = arena.allocate(4096, 4096);
        Set<Access> global = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.FLUSH_GLOBAL);
        Boolean from62 = rxeFrom62();
        boolean has = caps.feature("flush").orElseThrow().detail().contains("has IB_UVERBS_DEVICE_FLUSH_GLOBAL");
        if (from62 != null) {
            assertEquals(from62, has, caps.feature("flush").orElseThrow().toString());
        }
        if (!has) {
            refused(
                    "ibv_reg_mr",
                    Errno.EOPNOTSUPP,
                    () -> pd.register(arena, m, global),
                    "has no RDMA FLUSH for Access.FLUSH_GLOBAL",
                    "lacks IB_UVERBS_DEVICE_FLUSH_GLOBAL");
            return;
        }
        try (MemoryRegion mr = pd.register(arena, m, global)) {
            assertTrue(mr.access().contains(Access.FLUSH_GLOBAL), mr.access().toString());
        }
        if (from62 != null) { // rxe: persistent flush only for pmem; this is ordinary memory
            VerbsException e = org.junit.jupiter.api.Assertions.assertThrows(
                    VerbsException.class,
                    () -> pd.register(arena, m, EnumSet.of(Access.LOCAL_WRITE, Access.FLUSH_PERSISTENT)));
            System.out.println("[atomic write] FLUSH_PERSISTENT on ordinary memory: " + e.getMessage());
            assertEquals("ibv_reg_mr", e.verb(), e.getMessage());
        }
    }

    /**
     * Connects an extended queue pair (ATOMIC_WRITE) to a classic one, atomic-writes {@link #VALUE}
     * at {@link #AT} of {@code target} (registered with {@code access}) through
     * {@code postSendExtended}, and returns the completion's status (a success must say
     * {@code IBV_WC_ATOMIC_WRITE}).
     */
    private int writeInto(MemorySegment target, Set<Access> access, long wrId) {
        try (CompletionQueue cqA = ctx.createCompletionQueue(8);
                CompletionQueue cqB = ctx.createCompletionQueue(8);
                QueuePair a = pd.createExtendedQueuePair(
                        QueuePairInit.of(QueuePairType.RC, cqA), EnumSet.of(SendOperation.ATOMIC_WRITE));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqB));
                MemoryRegion mr = pd.register(arena, target, access);
                SendWorkRequests wrs = new SendWorkRequests(2, 1);
                WorkCompletions wcs = new WorkCompletions(4)) {
            GuestSupport.connect(a, b, gid, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
            wrs.atomicWrite(wrId, mr.address() + AT, mr.rkey(), VALUE).signaled();
            a.postSendExtended(wrs);
            GuestSupport.awaitAny(cqA, wcs, 1);
            assertEquals(wrId, wcs.wrId(0));
            int status = wcs.status(0);
            if (status == CompletionStatus.SUCCESS) {
                assertEquals(CompletionOpcode.ATOMIC_WRITE, wcs.opcode(0), "the completion's opcode");
                assertEquals(0, cqB.poll(wcs), "the peer sees no completion");
            }
            return status;
        }
    }
}
