package org.verbs4j.gpudirect;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.Context;
import org.verbs4j.DmaBufSupport;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier, real libibverbs and kernel: a real dma-buf, exported by the guest kernel's
 * {@code vgem} DRM driver (DRM_IOCTL_MODE_CREATE_DUMB, then DRM_IOCTL_PRIME_HANDLE_TO_FD, called
 * through FFM here), registered on rxe0 with {@code ibv_reg_dmabuf_mr}. rxe (Linux 6.1) has no
 * dma-buf registration: whatever it answers must be what the capability report predicted, with
 * its plain-words reason, and nothing may leak (no MR, no fd). The peermem way (ibv_reg_mr of a
 * device address) on memory the kernel cannot pin fails with EFAULT, explained.
 */
@RdmaTest
class DmaBufGuestTest {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
            CAPTURE.varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle OPEN = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("open"),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT),
            Linker.Option.captureCallState("errno"));
    private static final MethodHandle IOCTL = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("ioctl"),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS),
            Linker.Option.firstVariadicArg(2),
            Linker.Option.captureCallState("errno"));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("close"), FunctionDescriptor.of(JAVA_INT, JAVA_INT));

    // <drm/drm.h>, <drm/drm_mode.h> (x86_64): _IOWR('d', nr, size) = 0xC0000000 | size << 16 | 'd' << 8 | nr
    private static final long DRM_IOCTL_MODE_CREATE_DUMB = 0xC02064B2L; // struct drm_mode_create_dumb, 32 bytes
    private static final long DRM_IOCTL_PRIME_HANDLE_TO_FD = 0xC00C642DL; // struct drm_prime_handle, 12 bytes
    private static final long DRM_IOCTL_GEM_CLOSE = 0x40086409L; // _IOW: struct drm_gem_close, 8 bytes
    private static final int O_RDWR = 2, O_CLOEXEC = 0x80000;
    private static final int EOPNOTSUPP = 95, EFAULT = 14;
    private static final long SIZE = 64 * 4096;

    @Test
    void aVgemDmaBufOnRxeIsRefusedAsTheReportPredictsAndNothingLeaks() throws Throwable {
        String device = RdmaTestSupport.deviceName();
        assertNotNull(device, "no RDMA device");
        Path card = vgemCard();
        long fdsBefore = openFds();

        GpuCapabilityReport report = GpuCapabilityReport.collect();
        System.out.println(GpuCapabilityReportTest.render(report));
        assertFalse(report.cuda().available(), "no libcuda in the guest");
        GpuCapabilityReport.RdmaDevice rxe = report.rdmaDevice(device).orElseThrow();
        DmaBufSupport predicted = rxe.dmaBuf();
        assertNotNull(predicted, rxe.problem());
        assertEquals(DmaBufSupport.Verdict.NOT_SUPPORTED, predicted.verdict(), predicted.reason());
        assertEquals(EOPNOTSUPP, predicted.errno());
        assertTrue(predicted.reason().contains("(the probe answered EOPNOTSUPP)"), predicted.reason());
        assertTrue(
                report.conclusions().stream().anyMatch(c -> c.contains(device + " does not accept dma-buf")),
                report.conclusions().toString());

        int fd = exportDumbBuffer(card, SIZE);
        try {
            String info = Files.readString(Path.of("/proc/self/fdinfo/" + fd));
            // a real dma-buf of the DRM PRIME exporter, of the dumb buffer's size
            assertTrue(info.contains("exp_name:\tdrm") && info.contains("size:\t" + SIZE), "dma-buf fdinfo:\n" + info);
            try (Context ctx = Verbs.open(device);
                    ProtectionDomain pd = ctx.allocateProtectionDomain()) {
                assertEquals(predicted, pd.probeDmaBuf(), "the probe answers the same on a fresh PD");
                VerbsException e = assertThrows(
                        VerbsException.class,
                        () -> pd.registerDmaBuf(fd, 0, SIZE, 0, Access.LOCAL_WRITE, Access.REMOTE_WRITE));
                System.out.println("ibv_reg_dmabuf_mr on " + device + ": " + e.getMessage());
                assertEquals("ibv_reg_dmabuf_mr", e.verb());
                assertEquals(predicted.errno(), e.errno(), "what the report predicted");
                assertTrue(e.getMessage().contains("does not implement dma-buf registration"), e.getMessage());
                assertTrue(e.getMessage().contains("nvidia-peermem"), e.getMessage());
                // the peermem way on an adapter that cannot pin this memory: rxe gets EFAULT from the kernel
                // (no pages are mapped at 64 KiB: below vm.mmap_min_addr), explained in plain words
                VerbsException pin = assertThrows(
                        VerbsException.class,
                        () -> pd.registerDeviceMemory(0x10000, 4096, java.util.EnumSet.of(Access.LOCAL_WRITE)));
                System.out.println("ibv_reg_mr of an unmapped device address on " + device + ": " + pin.getMessage());
                assertEquals(EFAULT, pin.errno(), pin.getMessage());
                assertTrue(
                        pin.getMessage().contains("could not pin 4096 bytes of device memory at 0x10000"),
                        pin.getMessage());
                assertTrue(pin.getMessage().contains("nvidia-peermem"), pin.getMessage());
            } // closing the PD and the context would fail with EBUSY if an MR had been left behind
        } finally {
            assertEquals(0, (int) CLOSE.invokeExact(fd));
        }
        assertEquals(fdsBefore, openFds(), "no file descriptor leaked");
    }

    /** Loads vgem (the guest runs as root) and returns its /dev/dri/cardN. */
    private static Path vgemCard() throws IOException, InterruptedException {
        Process p =
                new ProcessBuilder("modprobe", "vgem").redirectErrorStream(true).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "modprobe vgem did not finish");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), "modprobe vgem: " + out);
        for (int tries = 0; tries < 50; tries++) {
            try (Stream<Path> cards = Files.list(Path.of("/sys/class/drm"))) {
                for (Path c : cards.filter(x -> x.getFileName().toString().matches("card\\d+"))
                        .toList()) {
                    if (c.toRealPath().toString().contains("/vgem/")) {
                        Path dev = Path.of("/dev/dri", c.getFileName().toString());
                        if (Files.exists(dev)) {
                            return dev;
                        }
                    }
                }
            } catch (IOException ignored) {
                // /sys/class/drm appears with the first DRM driver
            }
            Thread.sleep(100);
        }
        throw new AssertionError("vgem loaded but no /dev/dri/card* of it appeared");
    }

    /** A vgem dumb buffer of {@code size} bytes exported as a dma-buf fd (the GEM handle and the card fd closed). */
    private static int exportDumbBuffer(Path card, long size) throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment err = a.allocate(CAPTURE);
            int cardFd = (int) OPEN.invokeExact(err, a.allocateFrom(card.toString()), O_RDWR | O_CLOEXEC);
            assertTrue(cardFd >= 0, "open " + card + ": errno " + (int) ERRNO.get(err, 0L));
            try {
                MemorySegment dumb = a.allocate(32, 8); // height, width, bpp, flags, handle, pitch, size
                dumb.set(JAVA_INT, 0, (int) (size / 4096)); // rows of 1024 32-bit pixels = one page each
                dumb.set(JAVA_INT, 4, 1024);
                dumb.set(JAVA_INT, 8, 32);
                int rc = (int) IOCTL.invokeExact(err, cardFd, DRM_IOCTL_MODE_CREATE_DUMB, dumb);
                assertEquals(0, rc, "DRM_IOCTL_MODE_CREATE_DUMB: errno " + (int) ERRNO.get(err, 0L));
                int handle = dumb.get(JAVA_INT, 16);
                assertTrue(dumb.get(JAVA_LONG, 24) >= size, "dumb buffer of " + dumb.get(JAVA_LONG, 24) + " bytes");
                MemorySegment prime = a.allocate(12, 4); // handle, flags, fd
                prime.set(JAVA_INT, 0, handle);
                prime.set(JAVA_INT, 4, O_CLOEXEC | O_RDWR);
                prime.set(JAVA_INT, 8, -1);
                rc = (int) IOCTL.invokeExact(err, cardFd, DRM_IOCTL_PRIME_HANDLE_TO_FD, prime);
                assertEquals(0, rc, "DRM_IOCTL_PRIME_HANDLE_TO_FD: errno " + (int) ERRNO.get(err, 0L));
                MemorySegment close = a.allocate(8, 4);
                close.set(JAVA_INT, 0, handle);
                assertEquals(
                        0, (int) IOCTL.invokeExact(err, cardFd, DRM_IOCTL_GEM_CLOSE, close), "DRM_IOCTL_GEM_CLOSE");
                return prime.get(JAVA_INT, 8);
            } finally {
                int ignored = (int) CLOSE.invokeExact(cardFd);
            }
        }
    }

    private static long openFds() throws IOException {
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count();
        }
    }
}
