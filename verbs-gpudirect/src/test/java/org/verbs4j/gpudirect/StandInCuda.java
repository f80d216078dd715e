package org.verbs4j.gpudirect;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import org.verbs4j.testing.NativeToolchain;

/**
 * The stand-in libcuda ({@code /c/standin_cuda.c}), compiled once per JVM with the test
 * toolchain, loaded as a {@link CudaDriver}, and its test controls. Process-global state: tests
 * using it reset the configuration they change.
 */
final class StandInCuda {
    private static final Linker LINKER = Linker.nativeLinker();
    private static Path path;
    private static Path failingInit;
    private static SymbolLookup lookup;

    private StandInCuda() {}

    static synchronized Path path() {
        if (path == null) {
            NativeToolchain.requireToolchain();
            path = NativeToolchain.compileResourceSharedLibrary("/c/standin_cuda.c");
            lookup = SymbolLookup.libraryLookup(path, Arena.global());
        }
        return path;
    }

    /** A copy whose cuInit answers CUDA_ERROR_NO_DEVICE. */
    static synchronized Path withFailingInit() {
        if (failingInit == null) {
            failingInit = NativeToolchain.compileSharedLibrary(
                    "standin_cuda_noinit", NativeToolchain.resource("/c/standin_cuda.c"), "-DSTANDIN_INIT_RESULT=100");
        }
        return failingInit;
    }

    static CudaDriver driver() {
        return CudaDriver.load(path().toString());
    }

    private static MethodHandle fn(String name, FunctionDescriptor fd) {
        path();
        return LINKER.downcallHandle(lookup.findOrThrow(name), fd);
    }

    /** Devices, their DMA_BUF_SUPPORTED and GPU_DIRECT_RDMA_SUPPORTED attributes, and what dma-buf export answers. */
    static void configure(int devices, boolean dmaBuf, boolean gdr, int exportResult) {
        path(); // outside the try: without a toolchain the test is skipped, not failed
        try {
            fn("standin_cuda_configure", FunctionDescriptor.ofVoid(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT))
                    .invokeExact(devices, dmaBuf ? 1 : 0, gdr ? 1 : 0, exportResult);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /**
     * Whether later allocations map their device addresses read-write (the same pages the
     * stand-in's copies use) instead of {@code PROT_NONE}: only so that a software RDMA device can
     * pin them, as nvidia-peermem lets an adapter pin GPU memory.
     */
    static void hostVisible(boolean visible) {
        try {
            fn("standin_cuda_set_host_visible", FunctionDescriptor.ofVoid(JAVA_INT))
                    .invokeExact(visible ? 1 : 0);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** Whether later copies stay in the driver (waiting, without its lock) until released: a copy in progress. */
    static void holdCopies(boolean hold) {
        try {
            fn("standin_cuda_hold_copies", FunctionDescriptor.ofVoid(JAVA_INT)).invokeExact(hold ? 1 : 0);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** How many copies are held in the driver right now. */
    static int copiesHeld() {
        return (int) call("standin_cuda_copies_held", FunctionDescriptor.of(JAVA_INT));
    }

    static void reset() {
        configure(1, true, true, 0);
        hostVisible(false);
        holdCopies(false);
    }

    static int liveAllocations() {
        return (int) call("standin_cuda_live_allocations", FunctionDescriptor.of(JAVA_INT));
    }

    static int syncMemops(long dptr) {
        try {
            return (int) fn("standin_cuda_sync_memops", FunctionDescriptor.of(JAVA_INT, JAVA_LONG))
                    .invokeExact(dptr);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** 1: the last freed allocation's dma-buf fd was open at cuMemFree; 0: closed; -1: none. */
    static long fdOpenAtFree() {
        return (long) call("standin_cuda_fd_open_at_free", FunctionDescriptor.of(JAVA_LONG));
    }

    static long exports() {
        return (long) call("standin_cuda_exports", FunctionDescriptor.of(JAVA_LONG));
    }

    private static Object call(String name, FunctionDescriptor fd) {
        try {
            return fn(name, fd).invoke();
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
