package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier: the device as the library sees it on rxe0 (list, open, queries, GID table), the
 * life cycle of every object kind with {@code rdma res show} counted back to where it started,
 * a 1 GiB registration, async events, and the Cleaner releasing a leaked region.
 */
@RdmaTest
class DeviceGuestTest {
    private static final List<String> KINDS = List.of("ctx", "pd", "cq", "qp", "mr");

    private static String device() {
        String name = RdmaTestSupport.deviceName();
        assertNotNull(name, "no device");
        return name;
    }

    @Test
    void opensQueriesAndReleasesEverythingItCreated() throws Exception {
        String name = device();
        List<DeviceInfo> devices = Verbs.devices();
        assertTrue(devices.stream().anyMatch(d -> d.name().equals(name)), name + " not in " + devices);
        assertTrue(Verbs.isAvailable());
        assertEquals(Optional.empty(), Verbs.unavailabilityCause());
        System.out.println("devices: " + devices);

        Map<String, Integer> before = GuestSupport.resourceCounts(name);
        InetAddress ip = InetAddress.getByName(RdmaTestSupport.guestIp());
        try (Context ctx = Verbs.open(name)) {
            assertEquals(name, ctx.deviceName());
            DeviceAttributes dev = ctx.queryDevice();
            System.out.println(name + ": " + dev);
            assertTrue(dev.maxQpWr() > 0, "maxQpWr " + dev.maxQpWr());
            assertTrue(dev.supportsAtomics(), "rxe has atomics: atomicCap " + dev.atomicCap());
            assertTrue(dev.physPortCount() >= 1);
            assertTrue(
                    dev.maxSge() > 1 && dev.maxCqe() > 0 && dev.maxMrSize() != 0,
                    "maxSge, maxCqe, maxMrSize (unsigned)");

            PortAttributes port = ctx.queryPort(1);
            System.out.println(name + " port 1: " + port);
            assertTrue(port.isActive(), "port 1 is " + port.stateText());
            assertEquals(PortAttributes.STATE_ACTIVE, port.state());
            assertEquals(LinkLayer.ETHERNET, port.linkLayer());
            assertTrue(port.isRoce());
            assertNotNull(port.activeMtu());
            assertTrue(port.activeMtu().bytes() >= 1024, "active MTU " + port.activeMtu());
            assertTrue(port.gidTableLength() > 1);

            Gid wanted = Gid.ofAddress(ip);
            List<GidEntry> table = ctx.gidTable(1);
            System.out.println(name + " GID table: " + table);
            GidEntry v2 = table.stream()
                    .filter(e -> e.type() == GidType.ROCE_V2 && e.gid().equals(wanted))
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("no RoCE v2 entry " + wanted + " in " + table));
            assertEquals("0000:0000:0000:0000:0000:ffff:" + hex(ip), v2.gid().toString());
            assertEquals(ip, v2.gid().toInetAddress());
            assertEquals(v2, ctx.roceV2Gid(1, ip));
            assertEquals(wanted, ctx.queryGid(1, v2.index()));
            assertEquals(v2, ctx.firstRoceV2Ipv4Gid(1).orElseThrow());
            VerbsException none =
                    assertThrows(VerbsException.class, () -> ctx.roceV2Gid(1, InetAddress.getByName("192.0.2.77")));
            assertEquals(Errno.ENOENT, none.errno());
            assertTrue(none.getMessage().contains("ip addr add"), none.getMessage());

            try (ProtectionDomain pd = ctx.allocateProtectionDomain()) {
                try (MemoryRegion mr = pd.allocateMemoryRegion(1L << 30, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                        CompletionQueue cq = ctx.createCompletionQueue(64)) {
                    MemorySegment gib = mr.segment();
                    assertEquals(1L << 30, mr.length());
                    assertEquals(gib.address(), mr.address());
                    assertEquals(gib.address(), mr.iova());
                    assertEquals(EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE), mr.access());
                    assertTrue(mr.contains((1L << 30) - 8, 8));
                    assertFalse(mr.contains((1L << 30) - 8, 9));
                    assertTrue(cq.capacity() >= 64);
                    try (QueuePair qp = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq))) {
                        assertEquals(QueuePairState.RESET, qp.state());
                        assertEquals(QueuePairType.RC, qp.type());
                        assertTrue(qp.qpNumber() > 0);
                        assertTrue(qp.maxSendWr() >= 128 && qp.maxRecvWr() >= 128);
                        qp.toInit(1, EnumSet.of(Access.REMOTE_WRITE));
                        assertEquals(QueuePairState.INIT, qp.query().state());

                        Map<String, Integer> during = GuestSupport.resourceCounts(name);
                        for (String k : KINDS) {
                            assertTrue(
                                    during.get(k) >= before.get(k) + 1,
                                    k + ": before " + before + ", during " + during);
                        }
                        // owners refuse to go while their objects live
                        assertEquals(
                                Errno.EBUSY,
                                assertThrows(VerbsException.class, pd::close).errno());
                        assertEquals(
                                Errno.EBUSY,
                                assertThrows(VerbsException.class, cq::close).errno());
                        assertEquals(
                                Errno.EBUSY,
                                assertThrows(VerbsException.class, ctx::close).errno());
                    }
                }
            }
        }
        Map<String, Integer> after = GuestSupport.resourceCounts(name);
        for (String k : KINDS) {
            assertEquals(before.get(k), after.get(k), k + ": before " + before + ", after " + after);
        }
    }

    private static String hex(InetAddress ip) {
        byte[] b = ip.getAddress();
        return String.format("%02x%02x:%02x%02x", b[0], b[1], b[2], b[3]);
    }

    @Test
    void nextAsyncEventIsEmptyWhenNothingHappened() {
        try (Context ctx = Verbs.open(device())) {
            long t0 = System.nanoTime();
            assertEquals(Optional.empty(), ctx.nextAsyncEvent(Duration.ofMillis(300)));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 250 && ms < 10_000, "returned after " + ms + " ms");
        }
    }

    @Test
    void theCleanerReleasesALeakedRegion() throws InterruptedException {
        String name = device();
        try (Context ctx = Verbs.open(name);
                ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            int mrBefore = GuestSupport.resourceCounts(name).get("mr");
            registerAndDrop(pd);
            assertEquals(mrBefore + 1, GuestSupport.resourceCounts(name).get("mr"));
            assertEquals(1, pd.liveChildren());
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (pd.liveChildren() != 0 && System.nanoTime() < deadline) {
                System.gc();
                Thread.sleep(100);
            }
            assertEquals(0, pd.liveChildren(), "the Cleaner did not release the region within 30 s");
            assertEquals(mrBefore, GuestSupport.resourceCounts(name).get("mr"), "ibv_dereg_mr ran from the Cleaner");
        } // pd.close() succeeds: nothing is left on it
    }

    private static void registerAndDrop(ProtectionDomain pd) {
        MemoryRegion mr = pd.allocateMemoryRegion(64 * 1024, Access.LOCAL_WRITE);
        assertTrue(mr.isOpen() && mr.lkey() != 0);
    }
}
