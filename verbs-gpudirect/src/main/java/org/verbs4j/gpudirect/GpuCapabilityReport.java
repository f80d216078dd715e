package org.verbs4j.gpudirect;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.verbs4j.Context;
import org.verbs4j.DeviceInfo;
import org.verbs4j.DmaBufSupport;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;

/**
 * What this machine offers GPUDirect RDMA, and what that means, in plain words: the CUDA driver
 * (or why there is none) and the versions, each GPU with its PCI address and its dma-buf and
 * GPUDirect RDMA attributes, whether nvidia-peermem is loaded, each verbs device with its PCI
 * address and whether it accepts dma-buf registrations (probed: {@code ibv_reg_dmabuf_mr} of fd
 * -1, EBADF vs EOPNOTSUPP), the PCIe distance between each GPU and each verbs device, and a
 * conclusion per pair: which registration {@link GpuRegistrar} will use, or why none can work.
 *
 * <p>{@link #collect()} looks at this machine; {@link #render(PrintStream)} prints it. Collecting
 * opens each verbs device briefly (a protection domain for the probe) and touches nothing else.
 * Immutable once collected; any thread.
 */
public final class GpuCapabilityReport {

    /** The CUDA driver as found. */
    public record Cuda(boolean available, String library, String cause, int driverVersion, int headerVersion) {}

    /**
     * One verbs device.
     *
     * @param name       e.g. mlx5_0, rxe0
     * @param pciAddress its PCI function ({@code 0000:3b:00.0}), or null for a software device (rxe, siw)
     * @param numaNode   the NUMA node sysfs gives, or -1
     * @param dmaBuf     the dma-buf probe's answer, or null when the device could not be opened
     * @param problem    why it could not be probed, or null
     */
    public record RdmaDevice(String name, String pciAddress, int numaNode, DmaBufSupport dmaBuf, String problem) {}

    /**
     * One GPU with one verbs device.
     *
     * @param gpu        the GPU's ordinal
     * @param rdmaDevice the verbs device's name
     * @param distance   their PCIe distance
     * @param method     how GPU memory would be registered on it, or null when no way works
     * @param conclusion what it means, in plain words
     */
    public record Pair(
            int gpu, String rdmaDevice, PcieDistance distance, GpuRegistration.Method method, String conclusion) {}

    /** Where the verbs facts come from (the real devices, or a test's). */
    interface RdmaSource {
        /** Why libibverbs is unusable, or empty. */
        Optional<String> unavailabilityCause();

        List<String> deviceNames();

        /** The probe's answer; throws VerbsException when the device cannot be opened. */
        DmaBufSupport probe(String device);
    }

    static final RdmaSource SYSTEM = new RdmaSource() {
        @Override
        public Optional<String> unavailabilityCause() {
            return Verbs.unavailabilityCause();
        }

        @Override
        public List<String> deviceNames() {
            return Verbs.devices().stream().map(DeviceInfo::name).toList();
        }

        @Override
        public DmaBufSupport probe(String device) {
            try (Context c = Verbs.open(device);
                    ProtectionDomain pd = c.allocateProtectionDomain()) {
                return pd.probeDmaBuf();
            }
        }
    };

    private final Cuda cuda;
    private final List<GpuDevice> gpus;
    private final PeerMemory peerMemory;
    private final String verbsCause;
    private final List<RdmaDevice> rdmaDevices;
    private final List<Pair> pairs;
    private final List<String> conclusions;

    private GpuCapabilityReport(
            Cuda cuda,
            List<GpuDevice> gpus,
            PeerMemory peerMemory,
            String verbsCause,
            List<RdmaDevice> rdmaDevices,
            List<Pair> pairs,
            List<String> conclusions) {
        this.cuda = cuda;
        this.gpus = List.copyOf(gpus);
        this.peerMemory = peerMemory;
        this.verbsCause = verbsCause;
        this.rdmaDevices = List.copyOf(rdmaDevices);
        this.pairs = List.copyOf(pairs);
        this.conclusions = List.copyOf(conclusions);
    }

    /** This machine: the {@link CudaDriver#system() system CUDA driver}, {@code /sys}, the verbs devices. */
    public static GpuCapabilityReport collect() {
        return collect(CudaDriver.system(), Path.of("/sys"), SYSTEM);
    }

    /** This machine's verbs devices and sysfs, with the CUDA driver {@code driver}. */
    public static GpuCapabilityReport collect(CudaDriver driver) {
        return collect(driver, Path.of("/sys"), SYSTEM);
    }

    static GpuCapabilityReport collect(CudaDriver driver, Path sys, RdmaSource rdma) {
        Objects.requireNonNull(driver, "driver");
        Cuda cuda = new Cuda(
                driver.isAvailable(),
                driver.library(),
                driver.unavailabilityCause().orElse(null),
                driver.driverVersion(),
                CudaDriver.headerVersion());
        List<GpuDevice> gpus = new ArrayList<>();
        String gpuProblem = null;
        if (driver.isAvailable()) {
            try {
                gpus.addAll(driver.devices());
            } catch (VerbsException e) {
                gpuProblem = "the GPUs could not be listed: " + e.getMessage();
            }
        }
        PeerMemory peer = PeerMemory.detect(sys);
        String verbsCause = rdma.unavailabilityCause().orElse(null);
        List<RdmaDevice> devices = new ArrayList<>();
        if (verbsCause == null) {
            for (String name : rdma.deviceNames()) {
                String pci = rdmaPci(sys, name);
                int numa = pci == null ? -1 : PcieDistance.numaNode(sys, pci);
                try {
                    devices.add(new RdmaDevice(name, pci, numa, rdma.probe(name), null));
                } catch (VerbsException e) {
                    devices.add(new RdmaDevice(
                            name, pci, numa, null, "could not be opened for the probe: " + e.getMessage()));
                }
            }
        }
        List<Pair> pairs = new ArrayList<>();
        for (GpuDevice g : gpus) {
            for (RdmaDevice d : devices) {
                pairs.add(pair(sys, g, d, peer));
            }
        }
        return new GpuCapabilityReport(
                cuda,
                gpus,
                peer,
                verbsCause,
                devices,
                pairs,
                conclusions(cuda, gpus, gpuProblem, peer, verbsCause, devices, pairs));
    }

    /** The PCI function of verbs device {@code name} ({@code /sys/class/infiniband/<name>/device}), or null. */
    static String rdmaPci(Path sys, String name) {
        Path link = sys.resolve("class/infiniband").resolve(name).resolve("device");
        try {
            if (!Files.exists(link)) {
                return null;
            }
            String pci = link.toRealPath().getFileName().toString();
            return pci.matches("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]") ? pci : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static Pair pair(Path sys, GpuDevice g, RdmaDevice d, PeerMemory peer) {
        PcieDistance distance = d.pciAddress() == null
                ? PcieDistance.UNKNOWN
                : PcieDistance.between(sys, g.pciAddress(), d.pciAddress());
        String who = "GPU " + g.ordinal() + " with " + d.name() + ": ";
        boolean nicDmaBuf = d.dmaBuf() != null && d.dmaBuf().supported();
        GpuRegistration.Method method;
        StringBuilder c = new StringBuilder(who);
        if (!g.gpuDirectRdmaSupported()) {
            method = null;
            c.append("the GPU does not support GPUDirect RDMA (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0): "
                    + "RDMA must stage through host memory.");
        } else if (g.dmaBufSupported() && nicDmaBuf) {
            method = GpuRegistration.Method.DMA_BUF;
            c.append("GPU memory will be registered as a dma-buf (ibv_reg_dmabuf_mr).");
        } else if (peer.loaded()) {
            method = GpuRegistration.Method.PEERMEM;
            c.append("GPU memory will be registered through nvidia-peermem (ibv_reg_mr on the device pointer)")
                    .append(
                            g.dmaBufSupported()
                                    ? ", because " + d.name() + " does not accept dma-buf."
                                    : ", because " + "the GPU driver cannot export dma-bufs.");
        } else {
            method = null;
            c.append("GPU memory cannot be registered: ");
            if (!g.dmaBufSupported()) {
                c.append("the GPU driver cannot export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0)");
            } else {
                c.append(
                        d.dmaBuf() == null
                                ? d.name() + " could not be probed"
                                : d.dmaBuf().reason());
            }
            c.append(", and nvidia-peermem is not loaded. Load nvidia-peermem (modprobe nvidia-peermem), or use an "
                    + "adapter whose driver accepts dma-buf (mlx5, efa) with a GPU driver that exports them (515+).");
        }
        c.append(" PCIe: ")
                .append(distance.name().toLowerCase(java.util.Locale.ROOT).replace('_', ' '))
                .append(" (")
                .append(distance.nvidiaName())
                .append("): ")
                .append(distance.meaning())
                .append('.');
        return new Pair(g.ordinal(), d.name(), distance, method, c.toString());
    }

    private static List<String> conclusions(
            Cuda cuda,
            List<GpuDevice> gpus,
            String gpuProblem,
            PeerMemory peer,
            String verbsCause,
            List<RdmaDevice> devices,
            List<Pair> pairs) {
        List<String> out = new ArrayList<>();
        if (!cuda.available()) {
            out.add("No GPU memory can be used here: " + cuda.cause() + ".");
        } else if (gpuProblem != null) {
            out.add(gpuProblem);
        } else if (gpus.isEmpty()) {
            out.add("The CUDA driver sees no GPU.");
        }
        if (verbsCause != null) {
            out.add("No RDMA device can be used: " + verbsCause + ".");
        } else if (devices.isEmpty()) {
            out.add("libibverbs finds no RDMA device (load the adapter's driver, or rdma_rxe for Soft-RoCE).");
        }
        for (RdmaDevice d : devices) {
            if (d.dmaBuf() != null) {
                out.add(d.dmaBuf().reason() + ".");
            } else {
                out.add(d.name() + " " + d.problem());
            }
        }
        for (Pair p : pairs) {
            out.add(p.conclusion());
        }
        return out;
    }

    /** The CUDA driver as found. */
    public Cuda cuda() {
        return cuda;
    }

    /** The GPUs (empty without CUDA). */
    public List<GpuDevice> gpus() {
        return gpus;
    }

    /** Whether nvidia-peermem is loaded. */
    public PeerMemory peerMemory() {
        return peerMemory;
    }

    /** Why libibverbs is unusable, or empty. */
    public Optional<String> verbsUnavailabilityCause() {
        return Optional.ofNullable(verbsCause);
    }

    /** The verbs devices, each probed for dma-buf. */
    public List<RdmaDevice> rdmaDevices() {
        return rdmaDevices;
    }

    /** The verbs device {@code name}, if present. */
    public Optional<RdmaDevice> rdmaDevice(String name) {
        return rdmaDevices.stream().filter(d -> d.name().equals(name)).findFirst();
    }

    /** Every GPU with every verbs device. */
    public List<Pair> pairs() {
        return pairs;
    }

    /** What it all means, in plain words, one finding per line. */
    public List<String> conclusions() {
        return conclusions;
    }

    /** Prints the report. */
    public void render(PrintStream out) {
        out.println("GPUDirect RDMA capability report");
        out.println();
        out.println("CUDA driver (" + cuda.library() + "):");
        if (cuda.available()) {
            out.println("  driver API version " + CudaDriver.versionText(cuda.driverVersion())
                    + " (bindings from cuda.h " + CudaDriver.versionText(cuda.headerVersion()) + ")");
        } else {
            out.println("  unavailable: " + cuda.cause());
            out.println("  (bindings from cuda.h " + CudaDriver.versionText(cuda.headerVersion()) + ")");
        }
        for (GpuDevice g : gpus) {
            out.printf(
                    "  GPU %d: %s at %s, %d MiB, dma-buf export %s, GPUDirect RDMA %s%n",
                    g.ordinal(),
                    g.name(),
                    g.pciAddress(),
                    g.totalMemory() >> 20,
                    yesNo(g.dmaBufSupported()),
                    yesNo(g.gpuDirectRdmaSupported()));
        }
        out.println();
        out.println("nvidia-peermem: " + peerMemory.how());
        out.println();
        out.println("RDMA devices:");
        if (verbsCause != null) {
            out.println("  unavailable: " + verbsCause);
        } else if (rdmaDevices.isEmpty()) {
            out.println("  none");
        }
        for (RdmaDevice d : rdmaDevices) {
            out.printf(
                    "  %s: %s, dma-buf %s%n",
                    d.name(),
                    d.pciAddress() == null
                            ? "no PCI function (software device)"
                            : "PCI " + d.pciAddress() + (d.numaNode() >= 0 ? ", NUMA node " + d.numaNode() : ""),
                    d.dmaBuf() == null
                            ? "not probed (" + d.problem() + ")"
                            : d.dmaBuf()
                                            .verdict()
                                            .name()
                                            .toLowerCase(java.util.Locale.ROOT)
                                            .replace('_', ' ')
                                    + (d.dmaBuf().errno() != 0
                                            ? " (probe errno " + d.dmaBuf().errno() + ")"
                                            : ""));
        }
        if (!pairs.isEmpty()) {
            out.println();
            out.println("GPU <-> RDMA device:");
            for (Pair p : pairs) {
                out.printf(
                        "  GPU %d <-> %s: %s (%s), registration: %s%n",
                        p.gpu(),
                        p.rdmaDevice(),
                        p.distance().name().toLowerCase(java.util.Locale.ROOT).replace('_', ' '),
                        p.distance().nvidiaName(),
                        p.method() == null
                                ? "none"
                                : p.method() == GpuRegistration.Method.DMA_BUF ? "dma-buf" : "nvidia-peermem");
            }
        }
        out.println();
        out.println("What this means:");
        for (String c : conclusions) {
            out.println("  - " + c);
        }
    }

    private static String yesNo(boolean b) {
        return b ? "yes" : "no";
    }
}
