package org.verbs4j.bench.perf;

/** Entry point of {@code verbs-perf devices} for {@link org.verbs4j.bench.VerbsPerf}. */
public final class PerfDevicesCommand {
    private PerfDevicesCommand() {
    }

    /** Lists every device, port and GID; the exit status. */
    public static int run() {
        return PerfDevices.devices();
    }
}
