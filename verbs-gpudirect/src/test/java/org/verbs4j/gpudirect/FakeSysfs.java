package org.verbs4j.gpudirect;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A made-up sysfs tree, laid out as Linux lays out the parts verbs-gpudirect reads: PCI functions
 * under {@code devices/pciDDDD:BB/<bridges>/<function>} with {@code bus/pci/devices/<function>}
 * symlinks and {@code numa_node} files, verbs devices under {@code class/infiniband/<name>/device},
 * and the nvidia-peermem markers.
 */
final class FakeSysfs {
    final Path root;

    FakeSysfs(Path root) {
        this.root = root;
    }

    /** A PCI function at the end of {@code chain} (host bridge first, e.g. "pci0000:3a", "0000:3a:00.0", ...). */
    FakeSysfs pci(int numaNode, String... chain) {
        try {
            Path dir = root.resolve("devices");
            for (String c : chain) {
                dir = dir.resolve(c);
            }
            Files.createDirectories(dir);
            Files.writeString(dir.resolve("numa_node"), numaNode + "\n");
            Path link = root.resolve("bus/pci/devices").resolve(chain[chain.length - 1]);
            Files.createDirectories(link.getParent());
            Files.createSymbolicLink(link, link.getParent().relativize(dir));
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A verbs device {@code name} on PCI function {@code pci} (null: a software device without one). */
    FakeSysfs infiniband(String name, String pci) {
        try {
            Path dir = root.resolve("class/infiniband").resolve(name);
            Files.createDirectories(dir);
            if (pci != null) {
                Files.createSymbolicLink(
                        dir.resolve("device"),
                        root.resolve("bus/pci/devices").resolve(pci).toRealPath());
            }
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** nvidia-peermem's marker ({@code kernel/mm/memory_peers/nvidia-peermem/version}). */
    FakeSysfs peermem() {
        try {
            Path v = root.resolve("kernel/mm/memory_peers/nvidia-peermem/version");
            Files.createDirectories(v.getParent());
            Files.writeString(v, "1.2\n");
            return this;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
