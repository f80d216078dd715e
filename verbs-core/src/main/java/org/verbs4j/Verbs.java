package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.NativeLibraries;
import org.verbs4j.natives.ObjectLayout;

/**
 * Entry point: is RDMA usable here (and if not, why), which devices exist, open one.
 *
 * <p>Checked mode (the default) validates every work request on the Java side before it reaches
 * the provider (SGEs inside live registered regions, lengths, inline sizes, queue pair state);
 * {@code -D}{@value #UNCHECKED_PROPERTY}{@code =true} switches that off for the last few
 * nanoseconds, once a transport is known to be correct. Stateless; any thread may call it.
 */
public final class Verbs {
    /** System property that turns the Java-side validation of work requests off. */
    public static final String UNCHECKED_PROPERTY = "verbs4j.unchecked";
    /** Whether work requests are validated on the Java side (fixed at class initialisation). */
    public static final boolean CHECKED = !Boolean.getBoolean(UNCHECKED_PROPERTY);

    private static final String NO_DEVICE_HINT = "load the RDMA driver of the NIC, or create a Soft-RoCE device "
            + "(modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0); Verbs.unavailabilityCause() says what is "
            + "missing; see docs/troubleshooting.md";

    private Verbs() {}

    /** What {@code ibv_get_device_list} says, or why there is nothing to say. */
    private record Listing(List<DeviceInfo> devices, String cause) {}

    private static Listing list() {
        Optional<String> missing = NativeLibraries.ibverbsUnavailabilityCause();
        if (missing.isPresent()) {
            return new Listing(List.of(), missing.get());
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment listPtr;
            try {
                listPtr = LibIbverbs.getDeviceList(num);
            } catch (VerbsException e) {
                String why = e.errno() == Errno.ENOSYS
                        ? "the kernel has no RDMA support (ib_uverbs is not loaded, or /sys/class/infiniband_verbs is missing)"
                        : Errno.describe(e.errno());
                return new Listing(List.of(), why + " (ibv_get_device_list: " + Errno.name(e.errno()) + ")");
            }
            try {
                int n = num.get(JAVA_INT, 0);
                MemorySegment list = listPtr.reinterpret((long) (n + 1) * ADDRESS.byteSize());
                List<DeviceInfo> out = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    MemorySegment dev = list.getAtIndex(ADDRESS, i).reinterpret(ObjectLayout.DEVICE_NAME + 64);
                    out.add(new DeviceInfo(
                            LibIbverbs.getDeviceName(dev),
                            LibIbverbs.getDeviceGuid(dev),
                            dev.get(JAVA_INT, ObjectLayout.DEVICE_NODE_TYPE),
                            LibIbverbs.nodeTypeStr(dev.get(JAVA_INT, ObjectLayout.DEVICE_NODE_TYPE)),
                            dev.get(JAVA_INT, ObjectLayout.DEVICE_TRANSPORT_TYPE)));
                }
                return new Listing(
                        List.copyOf(out),
                        n == 0
                                ? "no RDMA device is present (ibv_get_device_list "
                                        + "returned none): load a driver or create a soft device, e.g. "
                                        + "rdma link add rxe0 type rxe netdev eth0"
                                : null);
            } finally {
                LibIbverbs.freeDeviceList(listPtr);
            }
        }
    }

    /** The RDMA devices of this machine; empty (never an exception) when there are none or no libibverbs. */
    public static List<DeviceInfo> devices() {
        return list().devices();
    }

    /** True when libibverbs loads and at least one device exists. */
    public static boolean isAvailable() {
        return unavailabilityCause().isEmpty();
    }

    /** Why verbs cannot be used here (library missing, no kernel support, no device), or empty. */
    public static Optional<String> unavailabilityCause() {
        return Optional.ofNullable(list().cause());
    }

    /** Throws a {@link VerbsException} with the cause when verbs cannot be used here. */
    public static void ensureAvailable() {
        unavailabilityCause().ifPresent(c -> {
            throw VerbsException.create("ibv_get_device_list", Errno.ENODEV, c, NO_DEVICE_HINT);
        });
    }

    /** Opens the device called {@code name} (e.g. {@code rxe0}, {@code mlx5_0}). */
    public static Context open(String name) {
        return openMatching(name);
    }

    /** Opens the first device. */
    public static Context openFirst() {
        return openMatching(null);
    }

    private static Context openMatching(String name) {
        NativeLibraries.ibverbsOrThrow();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment listPtr;
            try {
                listPtr = LibIbverbs.getDeviceList(num);
            } catch (VerbsException e) {
                // e.g. a bare ENOSYS without ib_uverbs: say what unavailabilityCause() knows
                DeviceUnavailableException d = new DeviceUnavailableException(
                        "ibv_open_device",
                        e.errno(),
                        "cannot open " + (name == null ? "an RDMA device" : name) + ": "
                                + unavailabilityCause().orElse(e.getMessage()),
                        NO_DEVICE_HINT);
                d.initCause(e);
                throw d;
            }
            try {
                int n = num.get(JAVA_INT, 0);
                MemorySegment list = listPtr.reinterpret((long) (n + 1) * ADDRESS.byteSize());
                List<String> names = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    MemorySegment dev = list.getAtIndex(ADDRESS, i);
                    String devName = LibIbverbs.getDeviceName(dev);
                    names.add(devName);
                    if (name == null || name.equals(devName)) {
                        return new Context(LibIbverbs.openDevice(dev), devName);
                    }
                }
                throw VerbsException.create(
                        "ibv_open_device",
                        Errno.ENODEV,
                        name == null
                                ? "no RDMA device is present"
                                : "no device named " + name + " (present: " + names + ")",
                        n == 0 ? NO_DEVICE_HINT : "list the devices with ibv_devices or Verbs.devices()");
            } finally {
                LibIbverbs.freeDeviceList(listPtr);
            }
        }
    }
}
