package org.verbs4j.perf;

/** Entry point of {@code verbs-perf devices} for {@link VerbsPerf}. */
public final class PerfDevicesCommand {
    private PerfDevicesCommand() {}

    /** Lists every device, port and GID; the exit status. */
    public static int run() {
        return PerfDevices.devices();
    }

    /**
     * {@code verbs-perf devices --caps}: every device's {@link org.verbs4j.CapabilityReport} (each
     * optional feature, yes or no and why); the exit status.
     */
    public static int capabilities() {
        java.util.List<org.verbs4j.DeviceInfo> list = org.verbs4j.Verbs.devices();
        if (list.isEmpty()) {
            System.out.println(
                    "No RDMA device: " + org.verbs4j.Verbs.unavailabilityCause().orElse("none listed"));
            return 1;
        }
        for (org.verbs4j.DeviceInfo d : list) {
            try (org.verbs4j.Context ctx = org.verbs4j.Verbs.open(d.name())) {
                System.out.print(ctx.capabilities().format());
            }
        }
        return 0;
    }
}
