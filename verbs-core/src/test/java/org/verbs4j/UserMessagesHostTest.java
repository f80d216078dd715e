package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: what a user reads. {@code Verbs.open} on a machine without RDMA says why (what
 * {@link Verbs#unavailabilityCause()} knows, not a bare errno); the verbs objects' {@code toString}
 * names the device, QP number, type and state, keys, sizes and capacities, and never a native
 * address (objects wrapped around the stand-in provider's fakes).
 */
class UserMessagesHostTest {

    @Test
    void openWithoutRdmaSaysWhy() {
        assumeFalse(Verbs.isAvailable(), "this machine has RDMA: nothing to refuse");
        String cause = Verbs.unavailabilityCause().orElseThrow();
        for (var open :
                List.<org.junit.jupiter.api.function.Executable>of(() -> Verbs.open("mlx5_0"), Verbs::openFirst)) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, open);
            assertEquals("ibv_open_device", e.verb(), e.getMessage());
            assertTrue(e.getMessage().contains(cause), "the cause '" + cause + "' is not in: " + e.getMessage());
            assertTrue(
                    e.getMessage().contains("rdma link add rxe0")
                            && e.getMessage().contains("docs/troubleshooting.md"),
                    "what to do is not in: " + e.getMessage());
        }
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, () -> Verbs.open("mlx5_0"));
        assertTrue(e.getMessage().contains("cannot open mlx5_0"), e.getMessage());
    }

    @Test
    void toStringNamesWhatAUserKnowsAndNoAddress() {
        try (StandInObjects o = StandInObjects.open()) {
            StandInProvider p = o.p;
            Context ctx = o.ctx;
            ProtectionDomain pd = o.pd;
            CompletionQueue cq = o.cq;
            MemoryRegion mr = o.mr;
            QueuePair qp =
                    ForeignHandles.queuePair(pd, p.qp(), QueuePairInit.of(QueuePairType.RC, cq), QueuePairState.RTS);
            SharedReceiveQueue srq = ForeignHandles.sharedReceiveQueue(pd, p.srq(), 64, 2);
            List<NativeResource> all = List.of(srq, qp, mr, cq, pd, ctx);
            String[] expected = {
                "SharedReceiveQueue on standin0, 64 WRs x 2 SGE",
                "QueuePair RC #" + StandInProvider.QP_NUM + " RTS on standin0",
                "MemoryRegion 4096 B on standin0, lkey 0x1111, rkey 0x2222, [LOCAL_WRITE, REMOTE_WRITE]",
                "CompletionQueue on standin0, capacity " + cq.capacity(),
                "ProtectionDomain on standin0",
                "Context standin0",
            };
            for (int i = 0; i < all.size(); i++) {
                assertEquals(expected[i], all.get(i).toString());
                assertNoAddress(all.get(i));
            }
            for (NativeResource r : all) {
                r.close();
            }
            for (int i = 0; i < all.size(); i++) {
                assertEquals(expected[i] + " (closed)", all.get(i).toString());
            }
        }
    }

    private static void assertNoAddress(NativeResource r) {
        String s = r.toString();
        long address = r.handle.address();
        if (address != 0) { // a wrapped region has no ibv_mr handle
            assertFalse(
                    s.contains(Long.toHexString(address)) || s.contains(Long.toString(address)),
                    "a native address in: " + s);
        }
        assertFalse(Pattern.compile("0x[0-9a-f]{9,}").matcher(s).find(), "an address-like number in: " + s);
    }
}
