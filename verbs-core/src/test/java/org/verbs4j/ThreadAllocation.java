package org.verbs4j;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Test helper: the heap bytes the current thread allocated so far, read through a method handle
 * called exactly (no boxing, nothing allocated by the read itself): the tests are compiled into
 * module org.verbs4j.core, which does not read java.management.
 */
final class ThreadAllocation {
    private static final MethodHandle ALLOCATED;
    private static final Object MX;

    static {
        try {
            MX = Class.forName("java.lang.management.ManagementFactory")
                    .getMethod("getThreadMXBean")
                    .invoke(null);
            ALLOCATED = MethodHandles.publicLookup()
                    .findVirtual(
                            Class.forName("com.sun.management.ThreadMXBean"),
                            "getCurrentThreadAllocatedBytes",
                            MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private ThreadAllocation() {}

    /** The current thread's allocated heap bytes. */
    static long allocated() {
        try {
            return (long) ALLOCATED.invokeExact(MX);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
