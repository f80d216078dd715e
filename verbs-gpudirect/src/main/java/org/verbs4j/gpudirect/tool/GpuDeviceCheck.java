package org.verbs4j.gpudirect.tool;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.verbs4j.VerbsException;
import org.verbs4j.gpudirect.CudaDriver;
import org.verbs4j.gpudirect.DmaBuf;
import org.verbs4j.gpudirect.GpuCapabilityReport;
import org.verbs4j.gpudirect.GpuDevice;
import org.verbs4j.gpudirect.GpuMemory;

/**
 * The device check of verbs-gpudirect (run by {@code verbs-gpudirect/device/gpu-check.sh} on a
 * machine with a GPU, from a jlink'd runtime and the built jars): allocate 1 GiB through the
 * binding, copy host to device to host and compare, export a dma-buf, time 1 GiB host-to-device
 * copies, print the capability report. Where there is no libcuda or no GPU it says why and exits
 * 0. Exit status 1 when a step that should work fails. Single-threaded.
 *
 * <p>Arguments: {@code [bytes]} (default 1 GiB) and {@code [repetitions]} of the timed copy (default 5).
 */
public final class GpuDeviceCheck {
    private GpuDeviceCheck() {}

    public static void main(String[] args) {
        long bytes = args.length > 0 ? Long.parseLong(args[0]) : 1L << 30;
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        System.exit(run(System.out, bytes, reps));
    }

    /** Runs the check, printing to {@code out}; returns the exit status. */
    public static int run(PrintStream out, long bytes, int reps) {
        out.println("== verbs-gpudirect device check: java " + Runtime.version() + ", " + System.getProperty("os.name")
                + " " + System.getProperty("os.arch"));
        CudaDriver cuda = CudaDriver.system();
        if (!cuda.isAvailable()) {
            out.println("no libcuda: " + cuda.unavailabilityCause().orElseThrow());
            GpuCapabilityReport.collect(cuda).render(out);
            out.println("RESULT: skipped (no CUDA driver here)");
            return 0;
        }
        out.println("CUDA driver API " + CudaDriver.versionText(cuda.driverVersion()) + " (" + cuda.library()
                + "), bindings from cuda.h " + CudaDriver.versionText(CudaDriver.headerVersion()));
        if (cuda.deviceCount() == 0) {
            out.println("no GPU: the driver sees none");
            GpuCapabilityReport.collect(cuda).render(out);
            out.println("RESULT: skipped (no GPU)");
            return 0;
        }
        GpuDevice gpu = cuda.device(0);
        out.println("GPU 0: " + gpu);
        boolean ok = true;
        try (Arena host = Arena.ofShared();
                GpuMemory mem = GpuMemory.allocate(cuda, 0, bytes)) {
            out.printf(
                    "allocated %d MiB at 0x%x (cuMemAlloc_v2, SYNC_MEMOPS set)%n", mem.byteSize() >> 20, mem.address());
            MemorySegment src = host.allocate(bytes, GpuMemory.hostPageSize());
            MemorySegment dst = host.allocate(bytes, GpuMemory.hostPageSize());
            for (long i = 0; i < bytes; i += 8) {
                src.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            mem.copyFromHost(src, 0);
            mem.copyToHost(0, dst);
            long mismatch = src.mismatch(dst);
            out.println("host -> device -> host of " + (bytes >> 20) + " MiB: "
                    + (mismatch == -1 ? "identical" : "MISMATCH at byte " + mismatch));
            ok &= mismatch == -1;

            double[] gbs = new double[reps];
            for (int r = 0; r < reps; r++) {
                long t0 = System.nanoTime();
                mem.copyFromHost(src, 0); // cuMemcpyHtoD is synchronous for pageable memory
                long ns = System.nanoTime() - t0;
                gbs[r] = bytes / (double) ns; // bytes per ns = GB/s
            }
            double[] sorted = gbs.clone();
            Arrays.sort(sorted);
            out.printf(
                    "binding: 1 GiB host->device (pageable, cuMemcpyHtoD_v2), %d runs: median %.2f GB/s, best %.2f GB/s%n",
                    reps, sorted[reps / 2], sorted[reps - 1]);
            out.printf("BINDING_HTOD_GBPS=%.3f%n", sorted[reps / 2]);

            try (DmaBuf d = mem.exportDmaBuf()) {
                out.println("dma-buf export: " + d);
            } catch (VerbsException e) {
                out.println("dma-buf export failed: " + e.getMessage()
                        + (gpu.dmaBufSupported()
                                ? " (the GPU reports dma-buf support: this is a failure)"
                                : " (the GPU reports no dma-buf support)"));
                ok &= !gpu.dmaBufSupported() || isSandboxed();
            }
        } catch (VerbsException e) {
            out.println("FAILED: " + e.getMessage());
            ok = false;
        }
        GpuCapabilityReport.collect(cuda).render(out);
        out.println("RESULT: " + (ok ? "ok" : "FAILED"));
        return ok ? 0 : 1;
    }

    /** gVisor reports kernel 4.4.0, which has no dma-buf export of GPU memory. */
    private static boolean isSandboxed() {
        return System.getProperty("os.version", "").startsWith("4.4.0");
    }
}
