package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): XRC as the device reports it. Where the capability report says no (rxe has
 * no IBV_DEVICE_XRC and refuses ibv_open_xrcd), the report names the attribute and the probe's
 * errno, and {@link Context#openXrcDomain} is refused with the same reason; where it says yes, an
 * XRC SRQ, an XRC_RECV and an XRC_SEND queue pair are made on the domain.
 */
@RdmaTest
class XrcGuestTest {
    @Test
    void xrcFollowsTheReportedCapability() {
        try (Context ctx = LoopbackPair.openTestDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(16)) {
            CapabilityReport.Feature f = ctx.capabilities().feature("xrc").orElseThrow();
            System.out.println(ctx.deviceName() + " " + f);
            if (f.supported()) {
                try (XrcDomain xrcd = ctx.openXrcDomain();
                        SharedReceiveQueue srq = pd.createXrcSharedReceiveQueue(xrcd, cq, 16, 1);
                        XrcReceiveQueuePair recv = xrcd.createReceiveQueuePair();
                        QueuePair send = pd.createQueuePair(QueuePairInit.of(QueuePairType.XRC_SEND, cq))) {
                    assertSame(xrcd, srq.xrcDomain());
                    assertEquals(QueuePairType.XRC_SEND, send.type());
                    System.out.println(ctx.deviceName() + " XRC SRQ #" + srq.srqNumber() + ", " + recv + ", " + send);
                }
            } else {
                VerbsException e = assertThrows(VerbsException.class, ctx::openXrcDomain);
                UserMessages.check(e);
                System.out.println(ctx.deviceName() + " openXrcDomain: " + e.getMessage());
                assertEquals("ibv_open_xrcd", e.verb(), e.getMessage());
                assertTrue(e.errno() == Errno.EOPNOTSUPP || e.errno() == Errno.ENOSYS, e.getMessage());
                assertEquals(XrcDomain.NO_XRC + "; ibv_open_xrcd probe: " + Errno.name(e.errno()), f.detail());
                assertTrue(
                        e.getMessage().contains(ctx.deviceName() + " offers no XRC: " + XrcDomain.NO_XRC),
                        e.getMessage());
            }
            assertTrue(pd.isOpen() && cq.isOpen());
        }
    }
}
