package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.CapabilityReport;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;

/**
 * Guest tier (rxe0): the buffers of {@code --use_hugepages}, {@code --odp} and {@code --dm}, and the
 * thread domain of {@code --no_lock}, on the device. With
 * a few huge pages reserved, the buffer is one MAP_HUGETLB mapping, registered, and holds what is
 * written to it; {@code --odp} follows the capability report: where it says no ODP (rxe), the
 * registration is refused with EOPNOTSUPP naming the missing capability, as the report does.
 */
@RdmaTest
class HostBufferProviderGuestTest {
    private static final Set<Access> ACCESS = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);

    @Test
    void hugePagesAndOnDemandPagingOnTheDevice() throws IOException {
        Path reserved = Path.of("/proc/sys/vm/nr_hugepages");
        String before = Files.readString(reserved).trim();
        Files.writeString(reserved, "8"); // 16 MiB of 2 MiB pages; the guest runs as root
        try (Context ctx = Verbs.openFirst();
                ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            HostBufferProvider huge = new HostBufferProvider(true, false);
            try (BufferProvider.PerfBuffer b = huge.allocate(pd, 1 << 20, ACCESS)) {
                b.segment().fill((byte) 0x5a);
                assertEquals(0x5a, b.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, (1 << 20) - 1));
                assertTrue(b.region().length() >= 1 << 20, b.region().toString());
                assertTrue(huge.describe().startsWith("huge pages"), huge.describe());
                System.out.println(ctx.deviceName() + " --use_hugepages: " + huge.describe() + ", " + b.region());
            }
            CapabilityReport.Feature odp = ctx.capabilities().feature("odp").orElseThrow();
            HostBufferProvider onDemand = new HostBufferProvider(false, true);
            if (odp.supported()) {
                try (BufferProvider.PerfBuffer b = onDemand.allocate(pd, 1 << 16, ACCESS)) {
                    assertTrue(
                            b.region().access().contains(Access.ON_DEMAND),
                            b.region().toString());
                }
            } else {
                VerbsException e = assertThrows(VerbsException.class, () -> onDemand.allocate(pd, 1 << 16, ACCESS));
                System.out.println(ctx.deviceName() + " --odp: " + e.getMessage());
                assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
                assertTrue(e.getMessage().contains(odp.detail()), e.getMessage() + " / " + odp.detail());
            }
        } finally {
            Files.writeString(reserved, before);
        }
    }

    /**
     * {@code --dm} and {@code --no_lock} follow the capability report: where it says the device has
     * no device memory or no thread domains (rxe), the buffer or the thread domain is refused with
     * EOPNOTSUPP naming what is missing, as the report does; where it says yes, they work.
     */
    @Test
    void deviceMemoryAndThreadDomainsFollowTheCapabilityReport() {
        try (Context ctx = Verbs.openFirst();
                ProtectionDomain pd = ctx.allocateProtectionDomain()) {
            CapabilityReport.Feature dm =
                    ctx.capabilities().feature("device memory").orElseThrow();
            DeviceMemoryBufferProvider onDevice = new DeviceMemoryBufferProvider();
            if (dm.supported()) {
                try (BufferProvider.PerfBuffer b = onDevice.allocate(pd, 1 << 12, ACCESS)) {
                    assertEquals(1 << 12, b.region().length(), b.region().toString());
                }
            } else {
                VerbsException e = assertThrows(VerbsException.class, () -> onDevice.allocate(pd, 1 << 12, ACCESS));
                System.out.println(ctx.deviceName() + " --dm: " + e.getMessage());
                assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
                assertTrue(e.getMessage().contains(dm.detail()), e.getMessage() + " / " + dm.detail());
            }
            CapabilityReport.Feature td =
                    ctx.capabilities().feature("thread domains").orElseThrow();
            if (td.supported()) {
                try (var t = ctx.allocateThreadDomain();
                        ProtectionDomain parent = t.allocateParentDomain(pd)) {
                    assertEquals(t, parent.threadDomain());
                }
            } else {
                VerbsException e = assertThrows(VerbsException.class, ctx::allocateThreadDomain);
                System.out.println(ctx.deviceName() + " --no_lock: " + e.getMessage());
                assertEquals(Errno.EOPNOTSUPP, e.errno(), e.getMessage());
            }
        }
    }
}
