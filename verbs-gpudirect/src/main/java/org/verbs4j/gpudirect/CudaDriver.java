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
 * {@code cuMemcpyHtoD_v2}, ...): each is one static final downcall handle, linked without an
 * address and called with {@code invokeExact} and the library's address of the function. Work on
 * a GPU runs in its primary context, retained once and made current on the calling thread for
 * each call. Thread-safe.
 */
public final class CudaDriver {
    /** System property naming the libcuda to load (a soname or an absolute path). */
    public static final String LIBRARY_PROPERTY = "verbs4j.libcuda";

    private static final Logger LOG = LoggerFactory.getLogger(CudaDriver.class);
    private static final Map<String, CudaDriver> LOADED = new ConcurrentHashMap<>();

    private final String library;
    private final String cause;
    private final int driverVersion;
    private final Symbols sym;
    private final Map<Integer, MemorySegment> primaryContexts = new ConcurrentHashMap<>();

    private CudaDriver(String library, String cause, int driverVersion, Symbols sym) {
        this.library = library;
        this.cause = cause;
        this.driverVersion = driverVersion;
        this.sym = sym;
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
            return unavailable(
                    library,
                    "native access is not enabled for verbs-gpudirect: run java with "
                            + "--enable-native-access=org.verbs4j.gpudirect (or ALL-UNNAMED on the class path)");
        } catch (IllegalArgumentException e) {
            return unavailable(
                    library,
                    library + " could not be loaded (" + e.getMessage() + "): no NVIDIA driver is "
                            + "installed here (the CUDA toolkit's headers and runtime are not the driver); install the NVIDIA "
                            + "driver, or point -D" + LIBRARY_PROPERTY + "= at its libcuda.so.1");
        }
        Symbols sym;
        try {
            sym = new Symbols(lib);
        } catch (NoSuchElementException e) {
            return unavailable(
                    library,
                    library + " lacks a function verbs4j needs (" + e.getMessage()
                            + "): the NVIDIA driver is older than CUDA 11.7 (cuMemGetHandleForAddressRange); update it");
        }
        CudaDriver probe = new CudaDriver(library, null, 0, sym);
        int rc = probe.cuInit(0);
        if (rc != 0) {
            return unavailable(library, "cuInit answered " + probe.describe(rc) + noDeviceHint(probe.name(rc)));
        }
        int version;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            probe.check("cuDriverGetVersion", probe.cuDriverGetVersion(v), null);
            version = v.get(JAVA_INT, 0);
        }
        LOG.debug("loaded {}: CUDA driver API {}", library, versionText(version));
        return new CudaDriver(library, null, version, sym);
    }

    private static String noDeviceHint(String name) {
        return switch (name) {
            case "CUDA_ERROR_NO_DEVICE" ->
                ": the driver sees no GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES, the container's " + "device access)";
            case "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" ->
                ": the kernel driver is " + "older than this libcuda; reinstall one driver version";
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
            throw new CudaException(
                    "cuInit",
                    cuda_h.CUDA_ERROR_NOT_INITIALIZED(),
                    "CUDA_ERROR_NOT_INITIALIZED",
                    "the CUDA driver is not usable",
                    cause);
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
            check("cuDeviceGetCount", cuDeviceGetCount(n), null);
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
            check("cuDeviceGetName", cuDeviceGetName(name, 256, dev), null);
            MemorySegment bus = a.allocate(64);
            check("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId(bus, 64, dev), null);
            MemorySegment bytes = a.allocate(JAVA_LONG);
            check("cuDeviceTotalMem_v2", cuDeviceTotalMem(bytes, dev), null);
            return new GpuDevice(
                    ordinal,
                    name.getString(0),
                    sysfsPciAddress(bus.getString(0)),
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
        check("cuDeviceGet", cuDeviceGet(d, ordinal), "ordinal " + ordinal + " of " + deviceCount() + " GPUs");
        return d.get(JAVA_INT, 0);
    }

    private int attribute(Arena a, int dev, int attr) {
        MemorySegment v = a.allocate(JAVA_INT);
        int rc = cuDeviceGetAttribute(v, attr, dev);
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
                check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(p, dev), null);
                return p.get(ADDRESS, 0);
            }
        });
        check("cuCtxSetCurrent", cuCtxSetCurrent(ctx), null);
    }

    long memAlloc(long size) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(JAVA_LONG);
            check("cuMemAlloc_v2", cuMemAlloc(p, size), "allocating " + size + " bytes");
            return p.get(JAVA_LONG, 0);
        }
    }

    int memFree(long dptr) {
        return cuMemFree(dptr);
    }

    void setSyncMemops(long dptr) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment one = a.allocate(JAVA_INT);
            one.set(JAVA_INT, 0, 1);
            check(
                    "cuPointerSetAttribute",
                    cuPointerSetAttribute(one, cuda_h.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS(), dptr),
                    "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS");
        }
    }

    void copyHtoD(long dst, MemorySegment src, long bytes) {
        check("cuMemcpyHtoD_v2", cuMemcpyHtoD(dst, src, bytes), null);
    }

    void copyDtoH(MemorySegment dst, long src, long bytes) {
        check("cuMemcpyDtoH_v2", cuMemcpyDtoH(dst, src, bytes), null);
    }

    void memset(long dst, byte value, long bytes) {
        check("cuMemsetD8_v2", cuMemsetD8(dst, value, bytes), null);
    }

    void synchronize() {
        check("cuCtxSynchronize", cuCtxSynchronize(), null);
    }

    /** {@code cuMemGetHandleForAddressRange(&fd, dptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)}. */
    int exportDmaBuf(long dptr, long size) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fd = a.allocate(JAVA_INT);
            fd.set(JAVA_INT, 0, -1);
            check(
                    "cuMemGetHandleForAddressRange",
                    cuMemGetHandleForAddressRange(fd, dptr, size, cuda_h.CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD(), 0L),
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
        static final MethodHandle CLOSE = CudaBinding.libc("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    }

    // ---- results -----------------------------------------------------------------------------

    private void check(String fn, int rc, String context) {
        if (rc != 0) {
            throw new CudaException(
                    fn, rc, name(rc), (context == null ? "" : context + ": ") + string(rc), hint(name(rc)));
        }
    }

    private static String hint(String name) {
        return switch (name) {
            case "CUDA_ERROR_OUT_OF_MEMORY" -> "free GPU memory, or allocate less";
            case "CUDA_ERROR_NOT_SUPPORTED" ->
                "this GPU or driver does not support it; see the capability report " + "(verbs-perf gpu-info)";
            case "CUDA_ERROR_INVALID_VALUE" -> "check the sizes, offsets and alignment";
            default -> null;
        };
    }

    /** "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory". */
    String describe(int rc) {
        return name(rc) + " (" + rc + "): " + string(rc);
    }

    String name(int rc) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            return text(cuGetErrorName(rc, p), p, "CUresult " + rc);
        }
    }

    private String string(int rc) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            return text(cuGetErrorString(rc, p), p, "unknown error");
        }
    }

    /** The C string {@code *p} points to, or {@code fallback} when the call failed or left it NULL. */
    private static String text(int rc, MemorySegment p, String fallback) {
        if (rc != 0 || p.get(ADDRESS, 0).equals(MemorySegment.NULL)) {
            return fallback;
        }
        return p.get(ADDRESS, 0).reinterpret(256).getString(0);
    }

    // ---- downcalls: each binding's handle with this library's address of the function -----------

    private int cuInit(int flags) {
        try {
            return (int) Fn.CU_INIT.handle().invokeExact(sym.cuInit, flags);
        } catch (Throwable t) {
            throw failed(Fn.CU_INIT, t);
        }
    }

    private int cuDriverGetVersion(MemorySegment version) {
        try {
            return (int) Fn.CU_DRIVER_GET_VERSION.handle().invokeExact(sym.cuDriverGetVersion, version);
        } catch (Throwable t) {
            throw failed(Fn.CU_DRIVER_GET_VERSION, t);
        }
    }

    private int cuGetErrorName(int rc, MemorySegment name) {
        try {
            return (int) Fn.CU_GET_ERROR_NAME.handle().invokeExact(sym.cuGetErrorName, rc, name);
        } catch (Throwable t) {
            throw failed(Fn.CU_GET_ERROR_NAME, t);
        }
    }

    private int cuGetErrorString(int rc, MemorySegment text) {
        try {
            return (int) Fn.CU_GET_ERROR_STRING.handle().invokeExact(sym.cuGetErrorString, rc, text);
        } catch (Throwable t) {
            throw failed(Fn.CU_GET_ERROR_STRING, t);
        }
    }

    private int cuDeviceGetCount(MemorySegment count) {
        try {
            return (int) Fn.CU_DEVICE_GET_COUNT.handle().invokeExact(sym.cuDeviceGetCount, count);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_GET_COUNT, t);
        }
    }

    private int cuDeviceGet(MemorySegment device, int ordinal) {
        try {
            return (int) Fn.CU_DEVICE_GET.handle().invokeExact(sym.cuDeviceGet, device, ordinal);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_GET, t);
        }
    }

    private int cuDeviceGetName(MemorySegment name, int length, int device) {
        try {
            return (int) Fn.CU_DEVICE_GET_NAME.handle().invokeExact(sym.cuDeviceGetName, name, length, device);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_GET_NAME, t);
        }
    }

    private int cuDeviceGetAttribute(MemorySegment value, int attribute, int device) {
        try {
            return (int)
                    Fn.CU_DEVICE_GET_ATTRIBUTE.handle().invokeExact(sym.cuDeviceGetAttribute, value, attribute, device);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_GET_ATTRIBUTE, t);
        }
    }

    private int cuDeviceGetPCIBusId(MemorySegment bus, int length, int device) {
        try {
            return (int) Fn.CU_DEVICE_GET_PCI_BUS_ID.handle().invokeExact(sym.cuDeviceGetPCIBusId, bus, length, device);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_GET_PCI_BUS_ID, t);
        }
    }

    private int cuDeviceTotalMem(MemorySegment bytes, int device) {
        try {
            return (int) Fn.CU_DEVICE_TOTAL_MEM.handle().invokeExact(sym.cuDeviceTotalMem, bytes, device);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_TOTAL_MEM, t);
        }
    }

    private int cuDevicePrimaryCtxRetain(MemorySegment context, int device) {
        try {
            return (int)
                    Fn.CU_DEVICE_PRIMARY_CTX_RETAIN.handle().invokeExact(sym.cuDevicePrimaryCtxRetain, context, device);
        } catch (Throwable t) {
            throw failed(Fn.CU_DEVICE_PRIMARY_CTX_RETAIN, t);
        }
    }

    private int cuCtxSetCurrent(MemorySegment context) {
        try {
            return (int) Fn.CU_CTX_SET_CURRENT.handle().invokeExact(sym.cuCtxSetCurrent, context);
        } catch (Throwable t) {
            throw failed(Fn.CU_CTX_SET_CURRENT, t);
        }
    }

    private int cuCtxSynchronize() {
        try {
            return (int) Fn.CU_CTX_SYNCHRONIZE.handle().invokeExact(sym.cuCtxSynchronize);
        } catch (Throwable t) {
            throw failed(Fn.CU_CTX_SYNCHRONIZE, t);
        }
    }

    private int cuMemAlloc(MemorySegment dptr, long size) {
        try {
            return (int) Fn.CU_MEM_ALLOC.handle().invokeExact(sym.cuMemAlloc, dptr, size);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEM_ALLOC, t);
        }
    }

    private int cuMemFree(long dptr) {
        try {
            return (int) Fn.CU_MEM_FREE.handle().invokeExact(sym.cuMemFree, dptr);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEM_FREE, t);
        }
    }

    private int cuMemcpyHtoD(long dst, MemorySegment src, long bytes) {
        try {
            return (int) Fn.CU_MEMCPY_HTOD.handle().invokeExact(sym.cuMemcpyHtoD, dst, src, bytes);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEMCPY_HTOD, t);
        }
    }

    private int cuMemcpyDtoH(MemorySegment dst, long src, long bytes) {
        try {
            return (int) Fn.CU_MEMCPY_DTOH.handle().invokeExact(sym.cuMemcpyDtoH, dst, src, bytes);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEMCPY_DTOH, t);
        }
    }

    private int cuMemsetD8(long dst, byte value, long bytes) {
        try {
            return (int) Fn.CU_MEMSET_D8.handle().invokeExact(sym.cuMemsetD8, dst, value, bytes);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEMSET_D8, t);
        }
    }

    private int cuMemGetHandleForAddressRange(MemorySegment handle, long dptr, long size, int type, long flags) {
        try {
            return (int) Fn.CU_MEM_GET_HANDLE_FOR_ADDRESS_RANGE
                    .handle()
                    .invokeExact(sym.cuMemGetHandleForAddressRange, handle, dptr, size, type, flags);
        } catch (Throwable t) {
            throw failed(Fn.CU_MEM_GET_HANDLE_FOR_ADDRESS_RANGE, t);
        }
    }

    private int cuPointerSetAttribute(MemorySegment value, int attribute, long dptr) {
        try {
            return (int)
                    Fn.CU_POINTER_SET_ATTRIBUTE.handle().invokeExact(sym.cuPointerSetAttribute, value, attribute, dptr);
        } catch (Throwable t) {
            throw failed(Fn.CU_POINTER_SET_ATTRIBUTE, t);
        }
    }

    /** What a downcall threw: unchecked as it was, anything else wrapped with the function's name. */
    private static RuntimeException failed(CudaBinding b, Throwable t) {
        if (t instanceof Error e) {
            throw e;
        }
        return t instanceof RuntimeException r ? r : new IllegalStateException(b.name(), t);
    }

    /**
     * The downcalls, linked once per JVM without an address (a handle takes the function's address
     * in the loaded library first). A holder class: linking needs native access, which
     * {@link #open} checks first.
     */
    private static final class Fn {
        static final CudaBinding CU_INIT = CudaBinding.cuda("cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
        static final CudaBinding CU_DRIVER_GET_VERSION =
                CudaBinding.cuda("cuDriverGetVersion", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        static final CudaBinding CU_GET_ERROR_NAME =
                CudaBinding.cuda("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        static final CudaBinding CU_GET_ERROR_STRING =
                CudaBinding.cuda("cuGetErrorString", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        static final CudaBinding CU_DEVICE_GET_COUNT =
                CudaBinding.cuda("cuDeviceGetCount", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        static final CudaBinding CU_DEVICE_GET =
                CudaBinding.cuda("cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        static final CudaBinding CU_DEVICE_GET_NAME =
                CudaBinding.cuda("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        static final CudaBinding CU_DEVICE_GET_ATTRIBUTE =
                CudaBinding.cuda("cuDeviceGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        static final CudaBinding CU_DEVICE_GET_PCI_BUS_ID =
                CudaBinding.cuda("cuDeviceGetPCIBusId", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        static final CudaBinding CU_DEVICE_TOTAL_MEM =
                CudaBinding.cuda("cuDeviceTotalMem_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        static final CudaBinding CU_DEVICE_PRIMARY_CTX_RETAIN =
                CudaBinding.cuda("cuDevicePrimaryCtxRetain", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        static final CudaBinding CU_CTX_SET_CURRENT =
                CudaBinding.cuda("cuCtxSetCurrent", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        static final CudaBinding CU_CTX_SYNCHRONIZE =
                CudaBinding.cuda("cuCtxSynchronize", FunctionDescriptor.of(JAVA_INT));
        static final CudaBinding CU_MEM_ALLOC =
                CudaBinding.cuda("cuMemAlloc_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        static final CudaBinding CU_MEM_FREE =
                CudaBinding.cuda("cuMemFree_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        static final CudaBinding CU_MEMCPY_HTOD =
                CudaBinding.cuda("cuMemcpyHtoD_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG));
        static final CudaBinding CU_MEMCPY_DTOH =
                CudaBinding.cuda("cuMemcpyDtoH_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
        static final CudaBinding CU_MEMSET_D8 =
                CudaBinding.cuda("cuMemsetD8_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_BYTE, JAVA_LONG));
        static final CudaBinding CU_MEM_GET_HANDLE_FOR_ADDRESS_RANGE = CudaBinding.cuda(
                "cuMemGetHandleForAddressRange",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
        static final CudaBinding CU_POINTER_SET_ATTRIBUTE = CudaBinding.cuda(
                "cuPointerSetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG));
    }

    /** One library's addresses of the functions (the names cuda.h selects); all must exist. */
    private static final class Symbols {
        final MemorySegment cuInit,
                cuDriverGetVersion,
                cuGetErrorName,
                cuGetErrorString,
                cuDeviceGetCount,
                cuDeviceGet,
                cuDeviceGetName,
                cuDeviceGetAttribute,
                cuDeviceGetPCIBusId,
                cuDeviceTotalMem,
                cuDevicePrimaryCtxRetain,
                cuCtxSetCurrent,
                cuCtxSynchronize,
                cuMemAlloc,
                cuMemFree,
                cuMemcpyHtoD,
                cuMemcpyDtoH,
                cuMemsetD8,
                cuMemGetHandleForAddressRange,
                cuPointerSetAttribute;

        Symbols(SymbolLookup l) {
            cuInit = l.findOrThrow(Fn.CU_INIT.name());
            cuDriverGetVersion = l.findOrThrow(Fn.CU_DRIVER_GET_VERSION.name());
            cuGetErrorName = l.findOrThrow(Fn.CU_GET_ERROR_NAME.name());
            cuGetErrorString = l.findOrThrow(Fn.CU_GET_ERROR_STRING.name());
            cuDeviceGetCount = l.findOrThrow(Fn.CU_DEVICE_GET_COUNT.name());
            cuDeviceGet = l.findOrThrow(Fn.CU_DEVICE_GET.name());
            cuDeviceGetName = l.findOrThrow(Fn.CU_DEVICE_GET_NAME.name());
            cuDeviceGetAttribute = l.findOrThrow(Fn.CU_DEVICE_GET_ATTRIBUTE.name());
            cuDeviceGetPCIBusId = l.findOrThrow(Fn.CU_DEVICE_GET_PCI_BUS_ID.name());
            cuDeviceTotalMem = l.findOrThrow(Fn.CU_DEVICE_TOTAL_MEM.name());
            cuDevicePrimaryCtxRetain = l.findOrThrow(Fn.CU_DEVICE_PRIMARY_CTX_RETAIN.name());
            cuCtxSetCurrent = l.findOrThrow(Fn.CU_CTX_SET_CURRENT.name());
            cuCtxSynchronize = l.findOrThrow(Fn.CU_CTX_SYNCHRONIZE.name());
            cuMemAlloc = l.findOrThrow(Fn.CU_MEM_ALLOC.name());
            cuMemFree = l.findOrThrow(Fn.CU_MEM_FREE.name());
            cuMemcpyHtoD = l.findOrThrow(Fn.CU_MEMCPY_HTOD.name());
            cuMemcpyDtoH = l.findOrThrow(Fn.CU_MEMCPY_DTOH.name());
            cuMemsetD8 = l.findOrThrow(Fn.CU_MEMSET_D8.name());
            cuMemGetHandleForAddressRange = l.findOrThrow(Fn.CU_MEM_GET_HANDLE_FOR_ADDRESS_RANGE.name());
            cuPointerSetAttribute = l.findOrThrow(Fn.CU_POINTER_SET_ATTRIBUTE.name());
        }
    }
}
