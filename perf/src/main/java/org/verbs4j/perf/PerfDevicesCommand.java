package org.verbs4j.perf;

/** Entry point of {@code verbs-perf devices} for {@link VerbsPerf}. */
public final class PerfDevicesCommand {
    private PerfDevicesCommand() {}

    /** Lists every device, port and GID; the exit status. */
    public static int run() {
        return PerfDevices.devices();
    }
}
