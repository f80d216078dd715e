package org.verbs4j.perf;

import java.io.PrintStream;
import org.verbs4j.gpudirect.GpuCapabilityReport;

/**
 * {@code verbs-perf gpu-info}: prints verbs-gpudirect's capability report (the CUDA driver and
 * its GPUs, nvidia-peermem, each verbs device's dma-buf support, the PCIe distance between each
 * GPU and each verbs device, and what that means). Works, and says why, without a driver, a GPU
 * or an RDMA device. Stateless; any thread.
 */
public final class GpuInfoCommand {
    private GpuInfoCommand() {}

    /** Collects and prints the report; returns the exit status (0: the report was printed). */
    public static int run(PrintStream out) {
        GpuCapabilityReport.collect().render(out);
        return 0;
    }

    /** Stand-alone: {@code java -cp verbs-perf.jar org.verbs4j.perf.GpuInfoCommand}. */
    public static void main(String[] args) {
        System.exit(run(System.out));
    }
}
