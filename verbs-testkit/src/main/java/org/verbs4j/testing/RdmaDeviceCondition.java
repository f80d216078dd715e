package org.verbs4j.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Enables a test only when a real verbs device exists, decided once per JVM with downcalls of its
 * own (the kit needs nothing of verbs4j): {@code libibverbs.so.1} missing, an error of
 * {@code ibv_get_device_list} (ENOSYS on a kernel without RDMA support) or an empty list disables
 * the test with the reason.
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

    private static final String LIBIBVERBS = "libibverbs.so.1";

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
        SymbolLookup ibverbs;
        try {
            ibverbs = SymbolLookup.libraryLookup(LIBIBVERBS, Arena.global());
        } catch (IllegalArgumentException | IllegalCallerException e) {
            return new Probe(
                    List.of(),
                    "no RDMA device: " + LIBIBVERBS + " cannot be loaded (install rdma-core's libibverbs): "
                            + e.getMessage());
        }
        Linker linker = Linker.nativeLinker();
        try (Arena arena = Arena.ofConfined()) {
            MethodHandle getList = linker.downcallHandle(
                    ibverbs.findOrThrow("ibv_get_device_list"),
                    FunctionDescriptor.of(ADDRESS, ADDRESS), // struct ibv_device **(int *num_devices)
                    Linker.Option.captureCallState("errno"));
            MethodHandle getName = linker.downcallHandle(
                    ibverbs.findOrThrow("ibv_get_device_name"), FunctionDescriptor.of(ADDRESS, ADDRESS));
            MethodHandle freeList = linker.downcallHandle(
                    ibverbs.findOrThrow("ibv_free_device_list"), FunctionDescriptor.ofVoid(ADDRESS));
            MemorySegment state = arena.allocate(Linker.Option.captureStateLayout());
            MemorySegment num = arena.allocate(JAVA_INT);
            MemorySegment list = (MemorySegment) getList.invokeExact(state, num);
            if (list.equals(MemorySegment.NULL)) {
                int errno = (int) ERRNO.get(state, 0L);
                return new Probe(
                        List.of(),
                        "no RDMA device: ibv_get_device_list: errno " + errno + " (" + strerror(errno) + ")");
            }
            try {
                int n = num.get(JAVA_INT, 0);
                if (n <= 0) {
                    return new Probe(List.of(), "no RDMA device present (ibv_get_device_list returned 0 devices)");
                }
                MemorySegment array = list.reinterpret(ADDRESS.byteSize() * n);
                List<String> names = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    MemorySegment name = (MemorySegment) getName.invokeExact(array.getAtIndex(ADDRESS, i));
                    names.add(name.reinterpret(Long.MAX_VALUE).getString(0));
                }
                return new Probe(List.copyOf(names), null);
            } finally {
                freeList.invokeExact(list);
            }
        } catch (Throwable e) {
            return new Probe(List.of(), "no RDMA device: probing " + LIBIBVERBS + " failed: " + e);
        }
    }

    private static final VarHandle ERRNO =
            Linker.Option.captureStateLayout().varHandle(MemoryLayout.PathElement.groupElement("errno"));

    /** The C library's text for {@code errno} (e.g. "Function not implemented" for ENOSYS). */
    private static String strerror(int errno) {
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle h = linker.downcallHandle(
                    linker.defaultLookup().findOrThrow("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));
            return ((MemorySegment) h.invokeExact(errno))
                    .reinterpret(Long.MAX_VALUE)
                    .getString(0);
        } catch (Throwable e) {
            return "strerror unavailable: " + e;
        }
    }
}
