package org.verbs4j.gpudirect;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The one place where verbs-gpudirect links a downcall: the CUDA driver API functions (by the
 * versioned names {@code cuda.h}'s macros select, e.g. {@code cuMemAlloc_v2}) and the C
 * library's {@code close(2)} and {@code getpagesize(3)}. Every link is recorded with its
 * hand-written descriptor, so that a test can compare each with jextract's descriptor of the same
 * C function ({@code cuda_h.<name>$descriptor()}). Thread-safe.
 *
 * <p>A CUDA function is linked once per JVM, without an address ({@link #cuda}): the library
 * is chosen at run time ({@link CudaDriver#load(String)}), so the handle takes the function's
 * address in the loaded library as its first argument. The binding is a static final constant
 * of {@link CudaDriver} and its handle is called with {@code invokeExact}.
 *
 * @param name       the C symbol
 * @param descriptor the hand-written descriptor
 * @param handle     the downcall (for a CUDA function: its address first, then the C arguments)
 */
record CudaBinding(String name, FunctionDescriptor descriptor, MethodHandle handle) {
    private static final Linker LINKER = Linker.nativeLinker();
    /** Every link made so far. */
    static final List<CudaBinding> ALL = new CopyOnWriteArrayList<>();

    /** A CUDA driver function, linked without an address: {@link #handle()} takes it first. */
    static CudaBinding cuda(String name, FunctionDescriptor fd) {
        CudaBinding b = new CudaBinding(name, fd, LINKER.downcallHandle(fd));
        ALL.add(b);
        return b;
    }

    /** Links {@code name} of {@code lib} (it must exist; {@link java.util.NoSuchElementException} otherwise). */
    static MethodHandle link(SymbolLookup lib, String name, FunctionDescriptor fd) {
        CudaBinding b = new CudaBinding(name, fd, LINKER.downcallHandle(lib.findOrThrow(name), fd));
        ALL.add(b);
        return b.handle();
    }

    /** The C library's function {@code name}. */
    static MethodHandle libc(String name, FunctionDescriptor fd) {
        return link(LINKER.defaultLookup(), name, fd);
    }
}
