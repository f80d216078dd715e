package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.verbs4j.gpudirect.generated.cuda.cuda_h;
import org.verbs4j.testing.NativeToolchain;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * The boundary of verbs-gpudirect: every downcall it links (through {@link CudaBinding}) has the
 * descriptor jextract derived from {@code cuda.h} for the same symbol, argument by argument;
 * each symbol is the versioned name the header's macros select (a name that {@code cuda.h}
 * redefines, such as {@code cuMemAlloc}, would bind the old ABI); only {@code CudaBinding} links
 * downcalls; the errno values {@link CudaException} uses are gcc's.
 */
@NeedsNativeToolchain
class CudaBindingConformanceTest {
    private static final Path CUDA_H =
            Path.of(System.getenv().getOrDefault("CUDA_INCLUDE", "/usr/local/cuda/include"), "cuda.h");

    private static final Set<String> LIBC = Set.of("close", "getpagesize");

    @Test
    void everyCudaDowncallMatchesJextractsDescriptor() throws Exception {
        // jextract's holders look the symbol up when their descriptor is asked for: load the stand-in first
        System.load(StandInCuda.path().toString());
        assertTrue(StandInCuda.driver().isAvailable());
        List<String> bad = new ArrayList<>();
        int compared = 0;
        assertEquals(1, Long.bitCount(GpuMemory.hostPageSize()), "getpagesize() linked: a power of two");
        for (CudaBinding b : CudaBinding.ALL) {
            if (b.name().equals("close")) {
                assertEquals(
                        FunctionDescriptor.of(
                                java.lang.foreign.ValueLayout.JAVA_INT, java.lang.foreign.ValueLayout.JAVA_INT),
                        b.descriptor(),
                        "int close(int)");
                continue;
            }
            if (b.name().equals("getpagesize")) {
                assertEquals(
                        FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_INT),
                        b.descriptor(),
                        "int getpagesize(void)");
                continue;
            }
            Method m = cuda_h.class.getMethod(b.name() + "$descriptor");
            FunctionDescriptor c = (FunctionDescriptor) m.invoke(null);
            if (!shape(c).equals(shape(b.descriptor()))) {
                bad.add(b.name() + ": C " + shape(c) + " vs bound " + shape(b.descriptor()));
            }
            compared++;
        }
        assertTrue(bad.isEmpty(), "descriptors differ from cuda.h: " + bad);
        assertEquals(20, compared, "every CUDA function bound: " + CudaBinding.ALL);
    }

    private static List<String> shape(FunctionDescriptor fd) {
        List<String> s = new ArrayList<>();
        s.add(fd.returnLayout().map(CudaBindingConformanceTest::carrier).orElse("void"));
        for (MemoryLayout l : fd.argumentLayouts()) {
            s.add(carrier(l));
        }
        return s;
    }

    private static String carrier(MemoryLayout l) {
        return ((java.lang.foreign.ValueLayout) l).carrier().getSimpleName() + l.byteSize();
    }

    @Test
    void symbolsAreTheVersionedNamesCudaHSelects() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isRegularFile(CUDA_H), CUDA_H + " is not installed here");
        String header = Files.readString(CUDA_H);
        System.load(StandInCuda.path().toString());
        StandInCuda.driver();
        for (CudaBinding b : CudaBinding.ALL) {
            assertTrue(
                    !header.contains("#define " + b.name() + " ") || LIBC.contains(b.name()),
                    b.name() + " is a macro in cuda.h: bind the name it expands to");
        }
        Set<String> names = CudaBinding.ALL.stream().map(CudaBinding::name).collect(Collectors.toSet());
        for (String versioned : List.of(
                "cuMemAlloc_v2",
                "cuMemFree_v2",
                "cuMemcpyHtoD_v2",
                "cuMemcpyDtoH_v2",
                "cuDeviceTotalMem_v2",
                "cuMemsetD8_v2")) {
            assertTrue(names.contains(versioned), versioned + " not bound: " + names);
            String plain = versioned.substring(0, versioned.length() - 3);
            assertTrue(
                    header.matches("(?s).*#define " + plain + "\\s+(__CUDA_API_PTDS\\()?" + versioned + ".*"),
                    "cuda.h maps " + plain + " to " + versioned);
        }
    }

    @Test
    void onlyCudaBindingLinksDowncalls() throws IOException {
        Path root = Path.of("src/main/java/org/verbs4j/gpudirect");
        assertTrue(Files.isDirectory(root), "run from the verbs-gpudirect module folder");
        List<String> offenders = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.filter(
                            f -> f.toString().endsWith(".java") && !f.toString().contains("/generated/"))
                    .toList()) {
                if (!p.getFileName().toString().equals("CudaBinding.java")
                        && Files.readString(p).contains("downcallHandle(")) {
                    offenders.add(root.relativize(p).toString());
                }
            }
        }
        assertTrue(offenders.isEmpty(), "link downcalls through CudaBinding: " + offenders);
    }

    @Test
    void errnoValuesAreGccs() {
        NativeToolchain.requireToolchain();
        Path exe = NativeToolchain.compileExecutable("gpudirect_errno", """
                #include <errno.h>
                #include <stdio.h>
                int main(void) { printf("%d %d %d %d %d %d\\n", ENOMEM, EINVAL, ENODEV, EOPNOTSUPP, EIO, EFAULT); return 0; }
                """);
        assertEquals(
                CudaException.ENOMEM + " " + CudaException.EINVAL + " " + CudaException.ENODEV + " "
                        + CudaException.EOPNOTSUPP + " " + CudaException.EIO + " " + CudaException.EFAULT,
                NativeToolchain.run(exe).strip());
    }
}
