package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): thread domains as the device reports them. Where the capability report says
 * no (rxe has no alloc_td op), the probe's errno and what is missing are in the report, and
 * {@link Context#allocateThreadDomain} is refused with them; where it says yes, a parent domain is
 * made with a thread domain and a queue pair created on it.
 */
@RdmaTest
class ThreadDomainGuestTest {
    @Test
    void threadDomainsFollowTheReportedCapability() {
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(4)) {
            CapabilityReport.Feature f =
                    ctx.capabilities().feature("thread domains").orElseThrow();
            System.out.println(ctx.deviceName() + " " + f);
            if (f.supported()) {
                try (ThreadDomain td = ctx.allocateThreadDomain();
                        ProtectionDomain parent = td.allocateParentDomain(pd);
                        QueuePair qp = parent.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq))) {
                    assertSame(td, parent.threadDomain());
                    assertTrue(qp.isOpen());
                    System.out.println(ctx.deviceName() + " parent domain with a thread domain carries " + qp);
                }
            } else {
                assertEquals("ibv_alloc_td probe: EOPNOTSUPP, " + ThreadDomain.NO_TD, f.detail());
                VerbsException e = assertThrows(VerbsException.class, ctx::allocateThreadDomain);
                UserMessages.check(e);
                assertEquals("ibv_alloc_td", e.verb(), e.getMessage());
                assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
                assertTrue(
                        e.getMessage().contains(ctx.deviceName() + " offers no thread domains: " + ThreadDomain.NO_TD));
                System.out.println(ctx.deviceName() + " allocateThreadDomain: " + e.getMessage());
            }
            assertTrue(pd.isOpen());
        }
    }
}
