package org.verbs4j.testing;

import java.util.List;

/**
 * Small helpers for {@link RdmaTest} tests: which device to use and the guest's address.
 * Stateless; thread-safe.
 */
public final class RdmaTestSupport {
    /** Environment variable naming the device to test (e.g. {@code rxe0}). */
    public static final String DEVICE_ENV = "VERBS4J_DEVICE";
    /** Environment variable with the guest's IPv4 address (set by softroce/run-in-guest.sh). */
    public static final String GUEST_IP_ENV = "VERBS4J_GUEST_IP";
    /** The guest's address when {@link #GUEST_IP_ENV} is not set. */
    public static final String DEFAULT_GUEST_IP = "10.0.0.1";

    private RdmaTestSupport() {}

    /**
     * The device to test: {@code $VERBS4J_DEVICE}, else the first device that
     * {@code ibv_get_device_list} reported (null when there is none).
     */
    public static String deviceName() {
        String env = System.getenv(DEVICE_ENV);
        if (env != null && !env.isBlank()) {
            return env.trim();
        }
        List<String> devices = RdmaDeviceCondition.probeResult().devices();
        return devices.isEmpty() ? null : devices.getFirst();
    }

    /** All devices that {@code ibv_get_device_list} reported (empty when none). */
    public static List<String> devices() {
        return RdmaDeviceCondition.probeResult().devices();
    }

    /** The IPv4 address of the device's netdev: {@code $VERBS4J_GUEST_IP}, else {@value #DEFAULT_GUEST_IP}. */
    public static String guestIp() {
        String env = System.getenv(GUEST_IP_ENV);
        return env == null || env.isBlank() ? DEFAULT_GUEST_IP : env.trim();
    }

    /** True inside the Soft-RoCE guest ({@code VERBS4J_GUEST=1}, set by softroce/run-in-guest.sh). */
    public static boolean inGuest() {
        return "1".equals(System.getenv("VERBS4J_GUEST"));
    }
}
