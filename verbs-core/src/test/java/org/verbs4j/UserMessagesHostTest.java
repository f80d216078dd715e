package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
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

    /** Refusals of arguments the API accepts the types of: the verb or constructor at fault, the value, a fix. */
    @Test
    void sizesAndCapacitiesAreRefusedNamingTheValueAndTheLimit() {
        try (StandInProvider p = StandInProvider.open();
                Arena arena = Arena.ofShared();
                StandInObjects o =
                        new StandInObjects(p, arena, p.context(), ForeignHandles.context(p.context(), "standin0"))) {
            VerbsException e = refused("ibv_create_cq", () -> o.ctx.createCompletionQueue(-1), "minEntries -1");
            assertFalse(e.getMessage().contains("device attributes"), e.getMessage());
            e = refused("ibv_reg_mr", () -> o.pd.allocateMemoryRegion(-4096), "size -4096 is not positive");
            assertFalse(e.getMessage().contains("access flags"), e.getMessage());
            e = refused("ibv_reg_mr", () -> o.pd.allocateMemoryRegion(Long.MAX_VALUE), "no memory for a region");
            assertEquals(org.verbs4j.natives.Errno.ENOMEM, e.errno());
        }
        refused("SendWorkRequests", () -> new SendWorkRequests(-1, 1), "capacity -1");
        refused("SendWorkRequests", () -> new SendWorkRequests(4, 1, 2 << 20), "maxInlinePerRequest 2097152");
        refused("ReceiveWorkRequests", () -> new ReceiveWorkRequests(1 << 30, 1), "at most 2^26");
        refused("WorkCompletions", () -> new WorkCompletions(-5), "capacity -5");
        refused("WorkCompletions", () -> new WorkCompletions((1 << 24) + 1), "16,777,216");
    }

    /** A bound of any length is accepted: a wait that ends at once does so, never an ArithmeticException. */
    @Test
    void anyDurationIsABound() throws Exception {
        Duration forever = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);
        try (StandInProvider p = StandInProvider.open();
                Arena arena = Arena.ofShared();
                StandInObjects o =
                        new StandInObjects(p, arena, p.context(), ForeignHandles.context(p.context(), "standin0"));
                WorkCompletions wcs = new WorkCompletions(4)) {
            p.queueCompletion(9, 0, CompletionOpcode.RDMA_WRITE, 0, 0x7777);
            assertEquals(1, o.cq.poll(wcs, 1, forever));
            assertEquals(0, o.cq.poll(wcs, 1, Duration.ofSeconds(Long.MIN_VALUE)));
        }
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                OutOfBandChannel c = OutOfBandChannel.connect(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort()), forever);
                OutOfBandChannel a = OutOfBandChannel.accept(server, forever)) {
            assertTrue(c != null && a != null);
        }
    }

    private static VerbsException refused(String verb, Executable call, String says) {
        VerbsException e = assertThrows(VerbsException.class, call);
        UserMessages.check(e);
        assertEquals(verb, e.verb(), e.getMessage());
        assertTrue(e.getMessage().contains(says), "'" + says + "' not in: " + e.getMessage());
        return e;
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
