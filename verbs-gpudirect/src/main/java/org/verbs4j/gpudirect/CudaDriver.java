package org.verbs4j.gpudirect;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.gpudirect.generated.cuda.cuda_h;

/**
 * The CUDA driver API ({@code libcuda.so.1}, which the NVIDIA driver installs), loaded lazily on
 * first use. Where there is no driver, no GPU, or no native access, it reports why
 * ({@link #unavailabilityCause()}) instead of throwing from a static initialiser, as
 * {@code org.verbs4j.Verbs} does; nothing else in verbs4j notices.
 *
 * <p>{@link #system()} is the library named by the system property {@value #LIBRARY_PROPERTY}
 * (default {@code libcuda.so.1}: a soname or an absolute path, e.g. a test's stand-in);
 * {@link #load(String)} opens another one. Each library is opened once into the global arena
 * and initialised with {@code cuInit(0)}. The functions are bound by the versioned names
 * {@code cuda.h}'s macros select ({@code cuMemAlloc_v2}, {@code cuMemFree_v2},
 * {@code cuMemcpyHtoD_v2}, ...). Work on a GPU runs in its primary context, retained once and
 * made current on the calling thread for each call. Thread-safe.
 */
public final class CudaDriver {
    /** System property naming the libcuda to load (a soname or an absolute path). */
    public static final String LIBRARY_PROPERTY = "verbs4j.libcuda";
    private static final Logger LOG = LoggerFactory.getLogger(CudaDriver.class);
    private static final Map<String, CudaDriver> LOADED = new ConcurrentHashMap<>();

    private final String library;
    private final String cause;
    private final int driverVersion;
    private final Handles h;
    private final Map<Integer, MemorySegment> primaryContexts = new ConcurrentHashMap<>();

    private CudaDriver(String library, String cause, int driverVersion, Handles h) {
        this.library = library;
        this.cause = cause;
        this.driverVersion = driverVersion;
        this.h = h;
    }

    /** The libcuda named by {@value #LIBRARY_PROPERTY} (default {@code libcuda.so.1}). */
    public static CudaDriver system() {
        return load(System.getProperty(LIBRARY_PROPERTY, "libcuda.so.1"));
    }

    /** The libcuda {@code library} (a soname or an absolute path), opened and initialised once. */
    public static CudaDriver load(String library) {
        return LOADED.computeIfAbsent(library, CudaDriver::open);
    }

    private static CudaDriver open(String library) {
        SymbolLookup lib;
        try {
            lib = SymbolLookup.libraryLookup(library, Arena.global());
        } catch (IllegalCallerException e) {
            return unavailable(library, "native access is not enabled for verbs-gpudirect: run java with "
                    + "--enable-native-access=org.verbs4j.gpudirect (or ALL-UNNAMED on the class path)");
        } catch (IllegalArgumentException e) {
            return unavailable(library, library + " could not be loaded (" + e.getMessage() + "): no NVIDIA driver is "
                    + "installed here (the CUDA toolkit's headers and runtime are not the driver); install the NVIDIA "
                    + "driver, or point -D" + LIBRARY_PROPERTY + "= at its libcuda.so.1");
        }
        Handles h;
        try {
            h = new Handles(lib);
        } catch (NoSuchElementException e) {
            return unavailable(library, library + " lacks a function verbs4j needs (" + e.getMessage()
                    + "): the NVIDIA driver is older than CUDA 11.7 (cuMemGetHandleForAddressRange); update it");
        }
        CudaDriver probe = new CudaDriver(library, null, 0, h);
        int rc = probe.raw(h.cuInit, "cuInit", 0);
        if (rc != 0) {
            return unavailable(library, "cuInit failed with " + probe.describe(rc) + noDeviceHint(probe.name(rc)));
        }
        int version;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            probe.check("cuDriverGetVersion", probe.raw(h.cuDriverGetVersion, "cuDriverGetVersion", v), null);
            version = v.get(JAVA_INT, 0);
        }
        LOG.debug("loaded {}: CUDA driver API {}", library, versionText(version));
        return new CudaDriver(library, null, version, h);
    }

    private static String noDeviceHint(String name) {
        return switch (name) {
            case "CUDA_ERROR_NO_DEVICE" -> ": the driver sees no GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES, the container's "
                    + "device access)";
            case "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" -> ": the kernel driver is "
                    + "older than this libcuda; reinstall one driver version";
            default -> "";
        };
    }

    private static CudaDriver unavailable(String library, String cause) {
        LOG.debug("CUDA unavailable: {}", cause);
        return new CudaDriver(library, cause, 0, null);
    }

    /** Whether the driver loaded and {@code cuInit} succeeded. */
    public boolean isAvailable() {
        return cause == null;
    }

    /** Why it cannot be used, or empty when it can. */
    public Optional<String> unavailabilityCause() {
        return Optional.ofNullable(cause);
    }

    /** The library name or path it was loaded from. */
    public String library() {
        return library;
    }

    /** {@code cuDriverGetVersion}: e.g. 13000 for CUDA 13.0 (0 when unavailable). */
    public int driverVersion() {
        return driverVersion;
    }

    /** The CUDA version of the {@code cuda.h} the bindings were generated from (13000 = 13.0). */
    public static int headerVersion() {
        return cuda_h.CUDA_VERSION();
    }

    /** "13.0" for 13000. */
    public static String versionText(int version) {
        return version / 1000 + "." + version % 1000 / 10;
    }

    /** Throws {@link CudaException} (CUDA_ERROR_NOT_INITIALIZED) with the cause unless available. */
    void ensureAvailable() {
        if (cause != null) {
            throw new CudaException("cuInit", cuda_h.CUDA_ERROR_NOT_INITIALIZED(), "CUDA_ERROR_NOT_INITIALIZED",
                    "the CUDA driver is not usable", cause);
        }
    }

    // ---- devices -------------------------------------------------------------------------

    /** {@code cuDeviceGetCount} (0 when unavailable). */
    public int deviceCount() {
        if (cause != null) {
            return 0;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment n = a.allocate(JAVA_INT);
            check("cuDeviceGetCount", raw(h.cuDeviceGetCount, "cuDeviceGetCount", n), null);
            return n.get(JAVA_INT, 0);
        }
    }

    /** Every GPU the driver sees, in ordinal order (empty when unavailable). */
    public List<GpuDevice> devices() {
        List<GpuDevice> all = new ArrayList<>();
        for (int i = 0, n = deviceCount(); i < n; i++) {
            all.add(device(i));
        }
        return all;
    }

    /** GPU {@code ordinal}: name, PCI address, memory, and the attributes GPUDirect RDMA depends on. */
    public GpuDevice device(int ordinal) {
        ensureAvailable();
        try (Arena a = Arena.ofConfined()) {
            int dev = handle(a, ordinal);
            MemorySegment name = a.allocate(256);
            check("cuDeviceGetName", raw(h.cuDeviceGetName, "cuDeviceGetName", name, 256, dev), null);
            MemorySegment bus = a.allocate(64);
            check("cuDeviceGetPCIBusId", raw(h.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", bus, 64, dev), null);
            MemorySegment bytes = a.allocate(JAVA_LONG);
            check("cuDeviceTotalMem_v2", raw(h.cuDeviceTotalMem, "cuDeviceTotalMem_v2", bytes, dev), null);
            return new GpuDevice(ordinal, name.getString(0), sysfsPciAddress(bus.getString(0)),
                    bytes.get(JAVA_LONG, 0),
                    attribute(a, dev, cuda_h.CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED()) != 0,
                    attribute(a, dev, cuda_h.CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED()) != 0);
        }
    }

    /**
     * The PCI address as sysfs names it: lower case, a 4-digit domain ({@code 00000000:3D:00.0},
     * as some drivers and nvidia-smi write it, becomes {@code 0000:3d:00.0}).
     */
    static String sysfsPciAddress(String cuda) {
        String s = cuda.strip().toLowerCase(Locale.ROOT);
        int colon = s.indexOf(':');
        if (colon > 4 && s.substring(0, colon - 4).chars().allMatch(c -> c == '0')) {
            s = s.substring(colon - 4);
        }
        return s;
    }

    private int handle(Arena a, int ordinal) {
        MemorySegment d = a.allocate(JAVA_INT);
        check("cuDeviceGet", raw(h.cuDeviceGet, "cuDeviceGet", d, ordinal), "ordinal " + ordinal + " of "
                + deviceCount() + " GPUs");
        return d.get(JAVA_INT, 0);
    }

    private int attribute(Arena a, int dev, int attr) {
        MemorySegment v = a.allocate(JAVA_INT);
        int rc = raw(h.cuDeviceGetAttribute, "cuDeviceGetAttribute", v, attr, dev);
        return rc == 0 ? v.get(JAVA_INT, 0) : 0; // an attribute this driver does not know: not supported
    }

    // ---- context and memory (used by GpuMemory) ----------------------------------------------

    /** Makes GPU {@code ordinal}'s primary context current on the calling thread (retained once per driver). */
    void makeCurrent(int ordinal) {
        ensureAvailable();
        MemorySegment ctx = primaryContexts.computeIfAbsent(ordinal, o -> {
            try (Arena a = Arena.ofConfined()) {
                int dev = handle(a, o);
                MemorySegment p = a.allocate(ADDRESS);
                check("cuDevicePrimaryCtxRetain", raw(h.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", p, dev), null);
                return p.get(ADDRESS, 0);
            }
        });
        check("cuCtxSetCurrent", raw(h.cuCtxSetCurrent, "cuCtxSetCurrent", ctx), null);
    }

    long memAlloc(long size) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(JAVA_LONG);
            check("cuMemAlloc_v2", raw(h.cuMemAlloc, "cuMemAlloc_v2", p, size), "allocating " + size + " bytes");
            return p.get(JAVA_LONG, 0);
        }
    }

    int memFree(long dptr) {
        return raw(h.cuMemFree, "cuMemFree_v2", dptr);
    }

    void setSyncMemops(long dptr) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment one = a.allocate(JAVA_INT);
            one.set(JAVA_INT, 0, 1);
            check("cuPointerSetAttribute", raw(h.cuPointerSetAttribute, "cuPointerSetAttribute", one,
                    cuda_h.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS(), dptr), "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS");
        }
    }

    void copyHtoD(long dst, MemorySegment src, long bytes) {
        check("cuMemcpyHtoD_v2", raw(h.cuMemcpyHtoD, "cuMemcpyHtoD_v2", dst, src, bytes), null);
    }

    void copyDtoH(MemorySegment dst, long src, long bytes) {
        check("cuMemcpyDtoH_v2", raw(h.cuMemcpyDtoH, "cuMemcpyDtoH_v2", dst, src, bytes), null);
    }

    void memset(long dst, byte value, long bytes) {
        check("cuMemsetD8_v2", raw(h.cuMemsetD8, "cuMemsetD8_v2", dst, value, bytes), null);
    }

    void synchronize() {
        check("cuCtxSynchronize", raw(h.cuCtxSynchronize, "cuCtxSynchronize"), null);
    }

    /** {@code cuMemGetHandleForAddressRange(&fd, dptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)}. */
    int exportDmaBuf(long dptr, long size) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fd = a.allocate(JAVA_INT);
            fd.set(JAVA_INT, 0, -1);
            check("cuMemGetHandleForAddressRange", raw(h.cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange",
                    fd, dptr, size, cuda_h.CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD(), 0L),
                    "exporting " + size + " bytes at 0x" + Long.toHexString(dptr) + " as a dma-buf (the range must be "
                            + "host-page aligned; the GPU and driver must support dma-buf: driver 515+ with the open "
                            + "kernel modules, or 530+)");
            return fd.get(JAVA_INT, 0);
        }
    }

    /** {@code close(2)} of a dma-buf fd; 0 or -1. */
    static int closeFd(int fd) {
        try {
            return (int) LibcClose.CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw new IllegalStateException("close(" + fd + ")", t);
        }
    }

    private static final class LibcClose {
        static final MethodHandle CLOSE = CudaBinding.link(java.lang.foreign.Linker.nativeLinker().defaultLookup(),
                "close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    }

    // ---- results -----------------------------------------------------------------------------

    private int raw(MethodHandle mh, String fn, Object... args) {
        try {
            return (int) mh.invokeWithArguments(args);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(fn, t);
        }
    }

    private void check(String fn, int rc, String context) {
        if (rc != 0) {
            throw new CudaException(fn, rc, name(rc), (context == null ? "" : context + ": ") + string(rc),
                    hint(name(rc)));
        }
    }

    private static String hint(String name) {
        return switch (name) {
            case "CUDA_ERROR_OUT_OF_MEMORY" -> "free GPU memory, or allocate less";
            case "CUDA_ERROR_NOT_SUPPORTED" -> "this GPU or driver does not support it; see the capability report "
                    + "(verbs-perf gpu-info)";
            case "CUDA_ERROR_INVALID_VALUE" -> "check the sizes, offsets and alignment";
            default -> null;
        };
    }

    /** "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory". */
    String describe(int rc) {
        return name(rc) + " (" + rc + "): " + string(rc);
    }

    String name(int rc) {
        return text(h.cuGetErrorName, rc, "CUresult " + rc);
    }

    private String string(int rc) {
        return text(h.cuGetErrorString, rc, "unknown error");
    }

    private String text(MethodHandle mh, int rc, String fallback) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            if (raw(mh, "cuGetErrorName", rc, p) != 0 || p.get(ADDRESS, 0).equals(MemorySegment.NULL)) {
                return fallback;
            }
            return p.get(ADDRESS, 0).reinterpret(256).getString(0);
        }
    }

    /** The handles of one library (bound by the versioned names cuda.h selects). */
    private static final class Handles {
        final MethodHandle cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString, cuDeviceGetCount, cuDeviceGet,
                cuDeviceGetName, cuDeviceGetAttribute, cuDeviceGetPCIBusId, cuDeviceTotalMem, cuDevicePrimaryCtxRetain,
                cuCtxSetCurrent, cuCtxSynchronize, cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH, cuMemsetD8,
                cuMemGetHandleForAddressRange, cuPointerSetAttribute;

        Handles(SymbolLookup l) {
            cuInit = CudaBinding.link(l, "cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
            cuDriverGetVersion = CudaBinding.link(l, "cuDriverGetVersion", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            cuGetErrorName = CudaBinding.link(l, "cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
            cuGetErrorString = CudaBinding.link(l, "cuGetErrorString", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
            cuDeviceGetCount = CudaBinding.link(l, "cuDeviceGetCount", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            cuDeviceGet = CudaBinding.link(l, "cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
            cuDeviceGetName = CudaBinding.link(l, "cuDeviceGetName",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
            cuDeviceGetAttribute = CudaBinding.link(l, "cuDeviceGetAttribute",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
            cuDeviceGetPCIBusId = CudaBinding.link(l, "cuDeviceGetPCIBusId",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
            cuDeviceTotalMem = CudaBinding.link(l, "cuDeviceTotalMem_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
            cuDevicePrimaryCtxRetain = CudaBinding.link(l, "cuDevicePrimaryCtxRetain",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
            cuCtxSetCurrent = CudaBinding.link(l, "cuCtxSetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            cuCtxSynchronize = CudaBinding.link(l, "cuCtxSynchronize", FunctionDescriptor.of(JAVA_INT));
            cuMemAlloc = CudaBinding.link(l, "cuMemAlloc_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
            cuMemFree = CudaBinding.link(l, "cuMemFree_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
            cuMemcpyHtoD = CudaBinding.link(l, "cuMemcpyHtoD_v2",
                    FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG));
            cuMemcpyDtoH = CudaBinding.link(l, "cuMemcpyDtoH_v2",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
            cuMemsetD8 = CudaBinding.link(l, "cuMemsetD8_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_BYTE, JAVA_LONG));
            cuMemGetHandleForAddressRange = CudaBinding.link(l, "cuMemGetHandleForAddressRange",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
            cuPointerSetAttribute = CudaBinding.link(l, "cuPointerSetAttribute",
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG));
        }
    }
}
