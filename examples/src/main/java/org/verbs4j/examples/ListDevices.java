package org.verbs4j.examples;

import java.io.PrintStream;
import java.util.List;
import org.verbs4j.Context;
import org.verbs4j.DeviceAttributes;
import org.verbs4j.DeviceInfo;
import org.verbs4j.GidEntry;
import org.verbs4j.PortAttributes;
import org.verbs4j.Verbs;

/**
 * Lists the RDMA devices of this machine: each device's attributes, its ports (state, MTU, link
 * layer) and their GID tables, the same facts as {@code ibv_devinfo -v} and {@code show_gids}.
 * Without RDMA it prints why ({@link Verbs#unavailabilityCause()}) and exits with status 1.
 */
public final class ListDevices {
    private ListDevices() {}

    /** Runs the example; {@code examples/run devices}. */
    public static void main(String[] args) {
        if (!run(System.out)) {
            System.exit(1);
        }
    }

    /** Prints the listing to {@code out}; false when there is no usable device. */
    public static boolean run(PrintStream out) {
        var cause = Verbs.unavailabilityCause();
        if (cause.isPresent()) {
            out.println("no RDMA here: " + cause.get());
            return false;
        }
        List<DeviceInfo> devices = Verbs.devices();
        out.println("devices: " + devices.size());
        for (DeviceInfo d : devices) {
            out.println("device " + d);
            try (Context ctx = Verbs.open(d.name())) {
                DeviceAttributes a = ctx.queryDevice();
                out.printf(
                        "  firmware %s, %d port(s), max %d QPs of %d WRs, max %d CQEs, atomics %s%n",
                        a.firmwareVersion().isEmpty() ? "-" : a.firmwareVersion(),
                        a.physPortCount(),
                        a.maxQp(),
                        a.maxQpWr(),
                        a.maxCqe(),
                        a.supportsAtomics() ? "yes" : "no");
                for (int port = 1; port <= a.physPortCount(); port++) {
                    PortAttributes p = ctx.queryPort(port);
                    out.printf(
                            "  port %d: %s, link layer %s, active MTU %d (max %d), LID %d%n",
                            port,
                            p.stateText(),
                            p.linkLayer(),
                            p.activeMtu().bytes(),
                            p.maxMtu().bytes(),
                            p.lid());
                    for (GidEntry g : ctx.gidTable(port)) {
                        out.printf(
                                "    GID index %d: %s (%s, %s)%n",
                                g.index(),
                                g.gid(),
                                g.type(),
                                g.gid().toInetAddress().getHostAddress());
                    }
                }
            }
        }
        return true;
    }
}
