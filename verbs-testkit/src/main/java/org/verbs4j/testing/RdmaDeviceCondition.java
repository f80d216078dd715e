package org.verbs4j.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.Failures;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.NativeLibraries;
import org.verbs4j.natives.VerbsFailure;

/**
 * Enables a test only when a real verbs device exists, decided once per JVM through verbs4j's own
 * native layer: {@link NativeLibraries#ibverbsUnavailabilityCause()} (libibverbs missing), then
 * {@code ibv_get_device_list} ({@link LibIbverbs#getDeviceList}): an error (ENOSYS on a kernel
 * without RDMA support) or an empty list disables the test with the reason.
 *
 * <p>With the environment variable {@value #REQUIRE_ENV}{@code =1} (or the system property
 * {@value #REQUIRE_PROPERTY}{@code =true}) a missing device throws instead, which JUnit reports as
 * a failed test: the guest tier sets it. In the guest ({@code VERBS4J_GUEST=1}) it also arranges
 * for {@link RdmaResourceReport} to print the rdma resources still held when all tests are done.
 * Thread-safe.
 */
public final class RdmaDeviceCondition implements ExecutionCondition {
    /** Environment variable: {@code 1} turns "no device" from a skip into a failure. */
    public static final String REQUIRE_ENV = "VERBS4J_REQUIRE_RDMA";
    /** System property with the same meaning as {@link #REQUIRE_ENV} ({@code true}). */
    public static final String REQUIRE_PROPERTY = "verbs4j.test.requireRdma";

    /** Made by JUnit for {@link RdmaTest} ({@code @ExtendWith}). */
    public RdmaDeviceCondition() {}

    /** What the probe found: the device names, or why there is none. */
    public record Probe(List<String> devices, String unavailableReason) {
        /** True when a device was found. */
        public boolean available() {
            return unavailableReason == null;
        }
    }

    private static final ExtensionContext.Namespace NAMESPACE =
            ExtensionContext.Namespace.create(RdmaDeviceCondition.class);

    private static final class Holder {
        static final Probe PROBE = probe();
    }

    /** The per-JVM probe (run on first use). */
    public static Probe probeResult() {
        return Holder.PROBE;
    }

    /** True when a missing device must fail the test rather than skip it. */
    public static boolean rdmaRequired() {
        return "1".equals(System.getenv(REQUIRE_ENV)) || Boolean.getBoolean(REQUIRE_PROPERTY);
    }

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        Probe p = probeResult();
        if (p.available()) {
            if (RdmaTestSupport.inGuest()) {
                context.getRoot()
                        .getStore(NAMESPACE)
                        .getOrComputeIfAbsent(
                                RdmaResourceReport.class, k -> new RdmaResourceReport(), RdmaResourceReport.class);
            }
            return ConditionEvaluationResult.enabled("RDMA device(s) present: " + String.join(", ", p.devices()));
        }
        if (rdmaRequired()) {
            throw new IllegalStateException(REQUIRE_ENV + "=1 but " + p.unavailableReason()
                    + " (the guest tier must run @RdmaTest tests on a real device, never skip them)");
        }
        return ConditionEvaluationResult.disabled(p.unavailableReason());
    }

    private static Probe probe() {
        Optional<String> missing;
        try {
            missing = NativeLibraries.ibverbsUnavailabilityCause();
        } catch (RuntimeException | LinkageError e) {
            return new Probe(List.of(), "no RDMA device: libibverbs could not be probed: " + e);
        }
        if (missing.isPresent()) {
            return new Probe(List.of(), "no RDMA device: " + missing.get());
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment list = LibIbverbs.getDeviceList(num);
            try {
                int n = num.get(JAVA_INT, 0);
                if (n <= 0) {
                    return new Probe(List.of(), "no RDMA device present (ibv_get_device_list returned 0 devices)");
                }
                MemorySegment array = list.reinterpret(ADDRESS.byteSize() * n);
                List<String> names = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    names.add(LibIbverbs.getDeviceName(array.getAtIndex(ADDRESS, i)));
                }
                return new Probe(List.copyOf(names), null);
            } finally {
                LibIbverbs.freeDeviceList(list);
            }
        } catch (RuntimeException e) {
            VerbsFailure f = Failures.describe(e); // core's VerbsException too (not a VerbsFailure itself)
            if (f != null) {
                return new Probe(
                        List.of(),
                        "no RDMA device: ibv_get_device_list: " + Errno.name(f.errno()) + " (" + e.getMessage() + ")");
            }
            return new Probe(List.of(), "no RDMA device: probing libibverbs failed: " + e);
        } catch (LinkageError e) {
            return new Probe(List.of(), "no RDMA device: probing libibverbs failed: " + e);
        }
    }
}
