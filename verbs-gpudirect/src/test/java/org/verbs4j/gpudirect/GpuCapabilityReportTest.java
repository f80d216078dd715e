package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.verbs4j.DmaBufSupport;
import org.verbs4j.DmaBufSupport.Verdict;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * Host tier: the capability report's logic on made-up sysfs trees (GPU and adapter under one
 * switch, under different sockets, a software adapter; peermem loaded or not) with the stand-in
 * libcuda, and on no driver at all. The verbs facts (device names, dma-buf probe answers) are
 * given, as the probe itself runs against real devices in the guest tier.
 */
@NeedsNativeToolchain
class GpuCapabilityReportTest {
    @TempDir
    Path tmp;

    @AfterEach
    void reset() {
        StandInCuda.reset();
    }

    private static GpuCapabilityReport.RdmaSource devices(Map<String, DmaBufSupport> answers) {
        return new GpuCapabilityReport.RdmaSource() {
            @Override
            public Optional<String> unavailabilityCause() {
                return Optional.empty();
            }

            @Override
            public List<String> deviceNames() {
                return List.copyOf(new java.util.TreeMap<>(answers).keySet());
            }

            @Override
            public DmaBufSupport probe(String device) {
                return answers.get(device);
            }
        };
    }

    private static final DmaBufSupport YES = new DmaBufSupport(Verdict.SUPPORTED, 9, "mlx5 accepts dma-buf");
    private static final DmaBufSupport NO = new DmaBufSupport(
            Verdict.NOT_SUPPORTED,
            95,
            "rxe0 does not accept dma-buf " + "registrations (the probe answered EOPNOTSUPP)");

    /**
     * The stand-in's GPU 0 (0000:3d:00.0) and mlx5_0 (0000:3e:00.0) below one switch (root port
     * 3a:00.0, switch upstream port 3b:00.0, downstream ports 3c:08.0 and 3c:10.0); mlx5_1 on
     * the other socket's host bridge; rxe0 a software device.
     */
    private FakeSysfs machine() {
        return new FakeSysfs(tmp)
                .pci(0, "pci0000:3a", "0000:3a:00.0", "0000:3b:00.0", "0000:3c:08.0", "0000:3d:00.0")
                .pci(0, "pci0000:3a", "0000:3a:00.0", "0000:3b:00.0", "0000:3c:10.0", "0000:3e:00.0")
                .pci(1, "pci0000:b0", "0000:b0:02.0", "0000:b1:00.0")
                .infiniband("mlx5_0", "0000:3e:00.0")
                .infiniband("mlx5_1", "0000:b1:00.0")
                .infiniband("rxe0", null);
    }

    @Test
    void sameSwitchDmaBufAcrossSocketsAndSoftwareAdapterAreToldApart() {
        GpuCapabilityReport r = GpuCapabilityReport.collect(
                StandInCuda.driver(), machine().root, devices(Map.of("mlx5_0", YES, "mlx5_1", YES, "rxe0", NO)));
        assertTrue(r.cuda().available());
        assertEquals(1, r.gpus().size());
        assertEquals("0000:3d:00.0", r.gpus().get(0).pciAddress());
        assertFalse(r.peerMemory().loaded());
        assertEquals("0000:3e:00.0", r.rdmaDevice("mlx5_0").orElseThrow().pciAddress());
        assertEquals(1, r.rdmaDevice("mlx5_1").orElseThrow().numaNode());
        assertNull(r.rdmaDevice("rxe0").orElseThrow().pciAddress());

        GpuCapabilityReport.Pair near = pair(r, "mlx5_0");
        assertEquals(PcieDistance.SAME_SWITCH, near.distance());
        assertEquals(GpuRegistration.Method.DMA_BUF, near.method());
        GpuCapabilityReport.Pair far = pair(r, "mlx5_1");
        assertEquals(PcieDistance.ACROSS_SOCKETS, far.distance());
        assertTrue(far.conclusion().contains("different CPU sockets"), far.conclusion());
        GpuCapabilityReport.Pair soft = pair(r, "rxe0");
        assertEquals(PcieDistance.UNKNOWN, soft.distance());
        assertNull(soft.method());
        assertTrue(
                soft.conclusion().contains("GPU memory cannot be registered: rxe0 does not accept dma-buf"),
                soft.conclusion());
        assertTrue(soft.conclusion().contains("nvidia-peermem is not loaded"), soft.conclusion());

        String text = render(r);
        assertTrue(text.contains("GPU 0: verbs4j stand-in GPU 0 at 0000:3d:00.0"), text);
        assertTrue(text.contains("dma-buf export yes, GPUDirect RDMA yes"), text);
        assertTrue(text.contains("mlx5_0: PCI 0000:3e:00.0, NUMA node 0, dma-buf supported"), text);
        assertTrue(
                text.contains("rxe0: no PCI function (software device), dma-buf not supported (probe errno 95)"), text);
        assertTrue(text.contains("GPU 0 <-> mlx5_0: same switch (PIX/PXB), registration: dma-buf"), text);
        assertTrue(text.contains("GPU 0 <-> mlx5_1: across sockets (SYS)"), text);
    }

    @Test
    void cudaPciAddressesAreReadInSysfsForm() {
        assertEquals("0000:3d:00.0", CudaDriver.sysfsPciAddress("00000000:3D:00.0"));
        assertEquals("0000:3d:00.0", CudaDriver.sysfsPciAddress("0000:3D:00.0"));
        assertEquals("0001:b1:00.1", CudaDriver.sysfsPciAddress("0001:B1:00.1"));
    }

    @Test
    void distancesFollowTheBridges() {
        FakeSysfs sys = machine()
                .pci(0, "pci0000:3a", "0000:3a:02.0", "0000:40:00.0") // another root port, same host bridge
                .pci(0, "pci0000:5d", "0000:5d:00.0", "0000:5e:00.0"); // another host bridge, same socket
        assertEquals(PcieDistance.SAME_SWITCH, PcieDistance.between(sys.root, "0000:3d:00.0", "0000:3e:00.0"));
        assertEquals(PcieDistance.SAME_HOST_BRIDGE, PcieDistance.between(sys.root, "0000:3d:00.0", "0000:40:00.0"));
        assertEquals(PcieDistance.SAME_SOCKET, PcieDistance.between(sys.root, "0000:3d:00.0", "0000:5e:00.0"));
        assertEquals(PcieDistance.ACROSS_SOCKETS, PcieDistance.between(sys.root, "0000:3d:00.0", "0000:b1:00.0"));
        assertEquals(PcieDistance.UNKNOWN, PcieDistance.between(sys.root, "0000:3d:00.0", "0000:99:00.0"));
    }

    @Test
    void peermemMakesAnAdapterWithoutDmaBufUsable() {
        FakeSysfs sys = new FakeSysfs(tmp)
                .pci(0, "pci0000:3a", "0000:3a:00.0", "0000:3d:00.0")
                .pci(0, "pci0000:3a", "0000:3a:02.0", "0000:3c:00.0")
                .infiniband("mlx4_0", "0000:3c:00.0")
                .peermem();
        GpuCapabilityReport r =
                GpuCapabilityReport.collect(StandInCuda.driver(), sys.root, devices(Map.of("mlx4_0", NO)));
        assertTrue(r.peerMemory().loaded());
        assertTrue(
                r.peerMemory().how().contains("nvidia-peermem loaded"),
                r.peerMemory().how());
        assertTrue(r.peerMemory().how().contains("version 1.2"), r.peerMemory().how());
        GpuCapabilityReport.Pair p = pair(r, "mlx4_0");
        assertEquals(GpuRegistration.Method.PEERMEM, p.method());
        assertTrue(p.conclusion().contains("because mlx4_0 does not accept dma-buf"), p.conclusion());
        assertEquals(PcieDistance.SAME_HOST_BRIDGE, p.distance());
    }

    @Test
    void aGpuWithoutGpuDirectRdmaIsToldToStage() {
        StandInCuda.configure(1, true, false, 0);
        GpuCapabilityReport r = GpuCapabilityReport.collect(
                StandInCuda.driver(), machine().peermem().root, devices(Map.of("mlx5_0", YES)));
        GpuCapabilityReport.Pair p = pair(r, "mlx5_0");
        assertNull(p.method());
        assertTrue(p.conclusion().contains("must stage through host memory"), p.conclusion());
    }

    @Test
    void withoutLibcudaTheReportSaysWhyAndStillProbesTheAdapters() {
        GpuCapabilityReport r = GpuCapabilityReport.collect(
                CudaDriver.load("/nonexistent/libcuda.so.1"), machine().root, devices(Map.of("rxe0", NO)));
        assertFalse(r.cuda().available());
        assertTrue(r.gpus().isEmpty());
        assertTrue(r.pairs().isEmpty());
        assertEquals(
                Verdict.NOT_SUPPORTED,
                r.rdmaDevice("rxe0").orElseThrow().dmaBuf().verdict());
        String text = render(r);
        assertTrue(text.contains("unavailable: /nonexistent/libcuda.so.1 could not be loaded"), text);
        assertTrue(text.contains("bindings from cuda.h 13.0"), text);
        assertTrue(text.contains("No GPU memory can be used here"), text);
        assertTrue(text.contains("rxe0 does not accept dma-buf registrations (the probe answered EOPNOTSUPP)"), text);
    }

    private static GpuCapabilityReport.Pair pair(GpuCapabilityReport r, String dev) {
        return r.pairs().stream()
                .filter(p -> p.rdmaDevice().equals(dev))
                .findFirst()
                .orElseThrow();
    }

    static String render(GpuCapabilityReport r) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        r.render(new PrintStream(b, true, StandardCharsets.UTF_8));
        return b.toString(StandardCharsets.UTF_8);
    }
}
