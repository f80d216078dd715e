package org.verbs4j.examples;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.gpudirect.GpuCapabilityReport;
import org.verbs4j.gpudirect.GpuMemory;
import org.verbs4j.gpudirect.GpuRegistration;
import org.verbs4j.gpudirect.GpuRegistrationException;

/**
 * GPU memory as an RDMA target (verbs-gpudirect, docs/gpudirect.md): allocates 1 MiB on GPU 0,
 * registers it with the RDMA device (dma-buf first, then nvidia-peermem), RDMA WRITEs 1 MiB from a
 * host region into it through two connected queue pairs, copies the GPU memory back to the host
 * with the CUDA driver and compares it byte for byte. The GPU memory has no host view: the CPU
 * never touches it, only the adapter and the CUDA copy do.
 *
 * <p>Where this machine cannot do it (no libcuda, no GPU, neither dma-buf nor nvidia-peermem on
 * this RDMA device) it prints {@code skipped: } and the reason from the
 * {@link GpuCapabilityReport capability report} or the registration, and returns normally: the
 * report says what is missing.
 */
public final class GpuDirectWrite {
    private static final int SIZE = 1 << 20;

    private GpuDirectWrite() {}

    /** Runs the example; {@code examples/run gpu}. Exits 0 when skipped. */
    public static void main(String[] args) {
        run(System.out);
    }

    /**
     * Runs the example, printing what it proves to {@code out}.
     *
     * @return true when the write was made and verified, false when skipped (the reason printed)
     */
    public static boolean run(PrintStream out) {
        GpuCapabilityReport report = GpuCapabilityReport.collect();
        if (!report.cuda().available()) {
            out.println("skipped: " + report.cuda().cause());
            return false;
        }
        if (report.gpus().isEmpty()) {
            out.println("skipped: the CUDA driver " + report.cuda().library() + " reports no GPU");
            return false;
        }
        out.println("GPU 0: " + report.gpus().getFirst().name() + " ("
                + report.gpus().getFirst().pciAddress() + ")");
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(16);
                MemoryRegion host = pd.allocateMemoryRegion(SIZE, Access.LOCAL_WRITE);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cq));
                SendWorkRequests wrs = new SendWorkRequests(1, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                GpuMemory gpu = GpuMemory.allocate(0, SIZE);
                Arena arena = Arena.ofConfined()) {
            gpu.fill((byte) 0);
            GpuRegistration reg;
            try {
                // dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr), else nvidia-peermem (ibv_reg_mr)
                reg = gpu.register(pd, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            } catch (GpuRegistrationException e) {
                out.println("skipped: GPU memory cannot be registered on " + ctx.deviceName() + ": " + e.getMessage());
                report.conclusions().forEach(c -> out.println("  " + c));
                return false;
            }
            out.println("registered " + SIZE + " bytes of GPU memory at 0x" + Long.toHexString(gpu.address()) + " on "
                    + ctx.deviceName() + " by " + reg.method() + " (rkey 0x"
                    + Integer.toHexString(reg.region().rkey())
                    + "); no host view: isHostAccessible() = " + reg.region().isHostAccessible());

            Setup.connect(a, b, Setup.gid(ctx), Set.of(Access.REMOTE_WRITE));
            MemorySegment src = host.segment();
            for (int i = 0; i < SIZE; i++) {
                src.set(JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            // the remote address is the device address: SGEs and peers use it as with host memory
            a.postSend(wrs.clear()
                    .write(1, reg.region().address(), reg.region().rkey())
                    .sge(host, 0, SIZE)
                    .signaled());
            Setup.await(cq, wcs, 1);

            MemorySegment back = arena.allocate(SIZE);
            gpu.copyToHost(0, back); // cuMemcpyDtoH: the only way the CPU sees it
            long mismatch = back.mismatch(src);
            if (mismatch != -1) {
                throw new IllegalStateException("GPU memory differs from what was written at byte " + mismatch);
            }
            out.println("RDMA WRITE: " + SIZE + " bytes from host memory landed in GPU memory, copied back with "
                    + "cuMemcpyDtoH and verified byte for byte");
            return true;
        }
    }
}
