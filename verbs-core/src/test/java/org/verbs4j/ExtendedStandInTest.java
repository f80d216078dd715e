package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import org.junit.jupiter.api.AfterEach;

/**
 * Test fixture of the extended-QP host tests: a stand-in provider of its own ({@link StandInObjects})
 * per test, and after each test the check that every {@code ibv_wr_*} call came between
 * {@code wr_start} and {@code wr_complete}/{@code wr_abort} and that none was left open.
 */
abstract class ExtendedStandInTest extends StandInHostTest {
    @AfterEach
    @Override
    void close() {
        assertEquals(0, p.wrProtocolErrors(), "ibv_wr_* called outside wr_start..wr_complete");
        assertFalse(p.inWr(), "a wr_start was left open");
        super.close();
    }

    /** An extended RC queue pair of the stand-in's create_qp_ex, in RTS, for {@code ops}. */
    static QueuePair extended(StandInObjects o, EnumSet<SendOperation> ops, int maxWr, int maxSge) {
        QueuePair qp = o.pd.createExtendedQueuePair(
                QueuePairInit.of(QueuePairType.RC, o.cq)
                        .maxSendWr(maxWr)
                        .maxRecvWr(maxWr)
                        .maxSendSge(maxSge)
                        .maxRecvSge(1)
                        .maxInlineData(64),
                ops,
                h -> o.p.free(h));
        qp.assumeState(QueuePairState.RTS);
        return qp;
    }

    /** A region with MW_BIND next to the fixture's (same PD, memory of its own). */
    static MemoryRegion bindable(StandInObjects o) {
        return ForeignHandles.memoryRegion(
                o.pd,
                o.arena.allocate(4096, 64),
                0x3131,
                0x3232,
                EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.MW_BIND));
    }

    /** A region with MW_BIND registered through the stand-in's reg_mr (a struct ibv_mr of its own, keys 0x7000+n / 0x9000+n). */
    static MemoryRegion registeredBindable(StandInObjects o) {
        return o.pd.register(
                java.lang.foreign.Arena.ofAuto().allocate(4096, 64),
                EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.MW_BIND),
                (pd, address, length, access) ->
                        MemorySegment.ofAddress(o.p.regDeviceMr(pd.address(), address, length, access)),
                h -> o.p.deregDeviceMr(h.address()));
    }
}
