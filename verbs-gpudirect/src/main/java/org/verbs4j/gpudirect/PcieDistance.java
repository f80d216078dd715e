package org.verbs4j.gpudirect;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * How far apart two PCI functions (a GPU and an RDMA adapter) are, read from sysfs
 * ({@code /sys/bus/pci/devices/<address>} resolves to the device's path through its bridges):
 * the path GPUDirect RDMA traffic takes between them. Named after {@code nvidia-smi topo -m}'s
 * PIX/PXB, PHB, NODE and SYS.
 */
public enum PcieDistance {
    /** Below one PCIe switch (PIX/PXB): peer-to-peer traffic stays in the switch. */
    SAME_SWITCH(
            "PIX/PXB",
            "the GPU and the adapter sit below the same PCIe switch: the best case for GPUDirect "
                    + "RDMA, traffic never reaches the CPU"),
    /** Below one root port without a switch in common. */
    SAME_ROOT_PORT("PXB", "the GPU and the adapter share a CPU root port: GPUDirect RDMA works well"),
    /** Through the CPU's host bridge (PHB): different root ports of one root complex. */
    SAME_HOST_BRIDGE(
            "PHB",
            "traffic between the GPU and the adapter passes through the CPU's root complex: "
                    + "GPUDirect RDMA works, but peer-to-peer bandwidth through the host bridge is lower on many CPUs"),
    /** Different host bridges of one CPU socket / NUMA node (NODE). */
    SAME_SOCKET(
            "NODE",
            "the GPU and the adapter hang off different host bridges of one CPU socket: peer-to-peer "
                    + "traffic crosses the socket's internal fabric, often slower than staging through host memory "
                    + "(NCCL does not use GPUDirect RDMA at this distance by default)"),
    /** Different CPU sockets (SYS): traffic crosses the inter-socket link. */
    ACROSS_SOCKETS(
            "SYS",
            "the GPU and the adapter are attached to different CPU sockets: GPUDirect RDMA traffic "
                    + "would cross the inter-socket link, usually slower than staging through host memory; use an adapter "
                    + "on the GPU's socket"),
    /** Not determinable (a virtual adapter such as rxe, or no sysfs entry). */
    UNKNOWN(
            "?",
            "no PCIe path between them could be determined (a software adapter such as rxe or siw has no "
                    + "PCI function)");

    private final String nvidiaName;
    private final String meaning;

    PcieDistance(String nvidiaName, String meaning) {
        this.nvidiaName = nvidiaName;
        this.meaning = meaning;
    }

    /** The nearest {@code nvidia-smi topo -m} name. */
    public String nvidiaName() {
        return nvidiaName;
    }

    /** What the distance means for GPUDirect RDMA, in plain words. */
    public String meaning() {
        return meaning;
    }

    /**
     * The distance between the PCI functions {@code a} and {@code b} ({@code 0000:3b:00.0}) in
     * the sysfs tree {@code sys}.
     */
    public static PcieDistance between(Path sys, String a, String b) {
        Optional<List<String>> pa = bridges(sys, a);
        Optional<List<String>> pb = bridges(sys, b);
        if (pa.isEmpty() || pb.isEmpty()) {
            return UNKNOWN;
        }
        List<String> x = pa.get();
        List<String> y = pb.get();
        if (!x.get(0).equals(y.get(0))) {
            int na = numaNode(sys, a);
            int nb = numaNode(sys, b);
            return na == nb || na < 0 || nb < 0 ? SAME_SOCKET : ACROSS_SOCKETS;
        }
        int common = 0;
        while (common < Math.min(x.size(), y.size()) - 1 && x.get(common).equals(y.get(common))) {
            common++;
        }
        return common >= 3 ? SAME_SWITCH : common == 2 ? SAME_ROOT_PORT : SAME_HOST_BRIDGE;
    }

    /** The path of {@code pci} from its host bridge ({@code pci0000:3a}) down to itself, or empty. */
    static Optional<List<String>> bridges(Path sys, String pci) {
        if (pci == null) {
            return Optional.empty();
        }
        try {
            Path real = sys.resolve("bus/pci/devices").resolve(pci).toRealPath();
            List<String> parts = new ArrayList<>();
            boolean in = false;
            for (Path p : real) {
                String s = p.toString();
                in |= s.startsWith("pci");
                if (in) {
                    parts.add(s);
                }
            }
            return parts.size() >= 2 ? Optional.of(parts) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /** The NUMA node sysfs gives for {@code pci}, or -1. */
    static int numaNode(Path sys, String pci) {
        if (pci == null) {
            return -1;
        }
        try {
            return Integer.parseInt(
                    Files.readString(sys.resolve("bus/pci/devices").resolve(pci).resolve("numa_node"))
                            .strip());
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
    }
}
