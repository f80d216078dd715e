package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * End-to-end smoke test of the guest tier: the raw native layer against a real device
 * (Soft-RoCE {@code rxe0} in the qemu guest). Open, query, allocate and free a protection domain,
 * close, asserting values that only a real kernel verbs stack returns.
 */
@RdmaTest
class GuestSmokeTest {

    @Test
    void opensQueriesAndAllocatesAProtectionDomain() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment list = LibIbverbs.getDeviceList(num);
            try {
                int n = num.get(JAVA_INT, 0);
                assertTrue(n > 0, "ibv_get_device_list returned " + n + " devices");
                MemorySegment array = list.reinterpret(ADDRESS.byteSize() * (n + 1L));
                assertEquals(0L, array.getAtIndex(ADDRESS, n).address(), "the device list is NULL-terminated");

                List<String> names = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    names.add(LibIbverbs.getDeviceName(array.getAtIndex(ADDRESS, i)));
                }
                if (RdmaTestSupport.inGuest()) {
                    assertTrue(names.contains("rxe0"), "the guest has rxe0; devices: " + names);
                }
                String want = RdmaTestSupport.deviceName();
                assertNotNull(want);
                int index = names.indexOf(want);
                assertTrue(index >= 0, "device " + want + " not in " + names);
                MemorySegment device = array.getAtIndex(ADDRESS, index);

                MemorySegment ctx = LibIbverbs.openDevice(device);
                assertNotEquals(0L, ctx.address());
                try {
                    MemorySegment attr = ibv_device_attr.allocate(arena);
                    LibIbverbs.queryDevice(ctx, attr);
                    int maxQpWr = ibv_device_attr.max_qp_wr(attr);
                    System.out.printf(
                            "%s: max_qp_wr=%d max_qp=%d max_sge=%d max_cqe=%d max_pd=%d "
                                    + "max_mr_size=%s phys_port_cnt=%d vendor_id=0x%x%n",
                            want,
                            maxQpWr,
                            ibv_device_attr.max_qp(attr),
                            ibv_device_attr.max_sge(attr),
                            ibv_device_attr.max_cqe(attr),
                            ibv_device_attr.max_pd(attr),
                            Long.toUnsignedString(ibv_device_attr.max_mr_size(attr)),
                            ibv_device_attr.phys_port_cnt(attr),
                            ibv_device_attr.vendor_id(attr));
                    assertTrue(maxQpWr > 0, "max_qp_wr " + maxQpWr);
                    assertTrue(ibv_device_attr.max_qp(attr) > 0, "max_qp");
                    assertTrue(ibv_device_attr.max_sge(attr) > 0, "max_sge");
                    assertTrue(ibv_device_attr.max_cqe(attr) > 0, "max_cqe");
                    assertTrue(ibv_device_attr.max_pd(attr) > 0, "max_pd");
                    assertTrue(ibv_device_attr.max_mr_size(attr) != 0, "max_mr_size");
                    assertTrue(ibv_device_attr.phys_port_cnt(attr) >= 1, "phys_port_cnt");

                    MemorySegment pd = LibIbverbs.allocPd(ctx);
                    assertNotEquals(0L, pd.address());
                    LibIbverbs.deallocPd(pd);
                } finally {
                    LibIbverbs.closeDevice(ctx);
                }
            } finally {
                LibIbverbs.freeDeviceList(list);
            }
        }
    }
}
