package org.verbs4j.gpudirect;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Whether the kernel can pin GPU memory for {@code ibv_reg_mr}: the nvidia-peermem module (or the
 * older out-of-tree nv_peer_mem) registers itself as a peer-memory client, visible in sysfs as
 * {@code /sys/kernel/mm/memory_peers/nvidia-peermem/version},
 * {@code /sys/kernel/mm/memory_peers/nv_mem/version} (nv_peer_mem), or {@code /sys/module/nvidia_peermem}.
 * Immutable.
 *
 * @param loaded whether one of them is present
 * @param how    what was found (the path and version), or what is missing and how to load it
 */
public record PeerMemory(boolean loaded, String how) {
    private static final List<String> MARKERS = List.of(
            "kernel/mm/memory_peers/nvidia-peermem/version",
            "kernel/mm/memory_peers/nv_mem/version",
            "module/nvidia_peermem");

    /** Looks under the sysfs root {@code sys} (normally {@code /sys}). */
    public static PeerMemory detect(Path sys) {
        for (String m : MARKERS) {
            Path p = sys.resolve(m);
            if (Files.exists(p)) {
                String version = "";
                Path v = Files.isDirectory(p) ? p.resolve("version") : p;
                try {
                    if (Files.isRegularFile(v)) {
                        version = " version " + Files.readString(v).strip();
                    }
                } catch (IOException ignored) {
                    // present but unreadable: still loaded
                }
                return new PeerMemory(
                        true,
                        (m.startsWith("module")
                                        ? "nvidia_peermem module"
                                        : m.contains("nv_mem") ? "nv_peer_mem" : "nvidia-peermem")
                                + " loaded (" + sys.resolve(m) + version + ")");
            }
        }
        return new PeerMemory(
                false,
                "nvidia-peermem is not loaded (none of " + sys.resolve(MARKERS.get(0)) + ", "
                        + sys.resolve(MARKERS.get(1)) + ", " + sys.resolve(MARKERS.get(2)) + " exists): load it with "
                        + "`modprobe nvidia-peermem` (it ships with the NVIDIA driver and needs the adapter's RDMA stack, "
                        + "e.g. MLNX_OFED or the inbox ib_core, loaded first)");
    }
}
