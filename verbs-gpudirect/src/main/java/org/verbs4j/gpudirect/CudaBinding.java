package org.verbs4j.gpudirect;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The one place where verbs-gpudirect links a downcall: the CUDA driver API functions of one
 * loaded {@code libcuda} (by the versioned names {@code cuda.h}'s macros select, e.g.
 * {@code cuMemAlloc_v2}) and {@code close(2)}. Every link is recorded with its hand-written
 * descriptor, so that a test can compare each with jextract's descriptor of the same C function
 * ({@code cuda_h.<name>$descriptor()}). Thread-safe.
 *
 * @param name       the C symbol
 * @param descriptor the hand-written descriptor
 */
record CudaBinding(String name, FunctionDescriptor descriptor) {
    private static final Linker LINKER = Linker.nativeLinker();
    /** Every link made so far. */
    static final List<CudaBinding> ALL = new CopyOnWriteArrayList<>();

    /** Links {@code name} of {@code lib} (it must exist; {@link java.util.NoSuchElementException} otherwise). */
    static MethodHandle link(SymbolLookup lib, String name, FunctionDescriptor fd) {
        MethodHandle h = LINKER.downcallHandle(lib.findOrThrow(name), fd);
        CudaBinding b = new CudaBinding(name, fd);
        if (!ALL.contains(b)) {
            ALL.add(b);
        }
        return h;
    }
}
