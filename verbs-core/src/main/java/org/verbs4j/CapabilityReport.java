package org.verbs4j;

import java.util.List;
import java.util.Optional;

/**
 * What a device can do of the optional verbs, per device and per port, as
 * {@link Context#capabilities()} found it: each feature with yes or no and, for yes, what limits
 * it (a device attribute), for no, why (the attribute that says so, the provider op that is
 * missing, or the errno a probe got). Features that can be tried cheaply (extended CQs, inline
 * data, dma-buf registration) are probed; the rest are read from {@code ibv_query_device_ex} and
 * the provider's op table. A value; {@link #format()} prints it one feature a line.
 *
 * @param device   the device name
 * @param provider the provider (libibverbs driver) name, or empty
 * @param features the device-wide features
 * @param ports    one entry per port
 */
public record CapabilityReport(String device, String provider, List<Feature> features, List<Port> ports) {
    /**
     * One optional feature.
     *
     * @param name      a short, stable name ({@code "atomics"}, {@code "odp"}, ...)
     * @param supported yes or no
     * @param detail    for yes, its limits; for no, the reason
     */
    public record Feature(String name, boolean supported, String detail) {
        static Feature yes(String name, String detail) {
            return new Feature(name, true, detail);
        }

        static Feature no(String name, String reason) {
            return new Feature(name, false, reason);
        }

        @Override
        public String toString() {
            return String.format("%-22s %-3s %s", name, supported ? "yes" : "no", detail);
        }
    }

    /**
     * One port.
     *
     * @param port     the port number (from 1)
     * @param state    its state ({@code PORT_ACTIVE}, ...)
     * @param features its features (link layer, MTU, RoCE v2 GID)
     */
    public record Port(int port, String state, List<Feature> features) {}

    /** Copies the lists (the report is a value). */
    public CapabilityReport {
        features = List.copyOf(features);
        ports = List.copyOf(ports);
    }

    /** The device-wide feature called {@code name}, if the report has one. */
    public Optional<Feature> feature(String name) {
        return features.stream().filter(f -> f.name().equals(name)).findFirst();
    }

    /** The report as text: a header, one line per device feature, then each port's lines. */
    public String format() {
        StringBuilder sb = new StringBuilder();
        sb.append(device)
                .append(" (provider ")
                .append(provider.isEmpty() ? "unknown" : provider)
                .append(")\n");
        for (Feature f : features) {
            sb.append("  ").append(f).append('\n');
        }
        for (Port p : ports) {
            sb.append("  port ").append(p.port()).append(" (").append(p.state()).append(")\n");
            for (Feature f : p.features()) {
                sb.append("    ").append(f).append('\n');
            }
        }
        return sb.toString();
    }
}
