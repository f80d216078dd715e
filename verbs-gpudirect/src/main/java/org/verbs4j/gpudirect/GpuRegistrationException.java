package org.verbs4j.gpudirect;

import java.util.List;
import org.verbs4j.VerbsException;

/**
 * GPU memory could not be registered by any way its {@link GpuRegistrar} may try: the message
 * lists each step and why it failed or was not tried, and the hint says what is missing.
 * The errno is that of the last failed verb, or EOPNOTSUPP when nothing could be tried. Immutable.
 */
public final class GpuRegistrationException extends VerbsException {
    private static final long serialVersionUID = 1L;
    private final transient List<String> attempts;

    GpuRegistrationException(String where, GpuRegistrar.Mode mode, List<String> attempts, VerbsException last) {
        super(
                mode == GpuRegistrar.Mode.PEERMEM ? "ibv_reg_mr" : "ibv_reg_dmabuf_mr",
                last != null ? last.errno() : CudaException.EOPNOTSUPP,
                "GPU memory of " + where + " could not be registered (" + mode + "); tried: "
                        + String.join("; ", attempts),
                HINT,
                last);
        this.attempts = List.copyOf(attempts);
    }

    private static final String HINT =
            "GPUDirect RDMA needs either dma-buf (GPU driver 515+ and an adapter whose driver implements "
                    + "reg_dmabuf_mr: mlx5, efa) or the nvidia-peermem kernel module (modprobe nvidia-peermem); "
                    + "`verbs-perf gpu-info` reports which of these this machine has";

    /** Each step tried, with its outcome, in order. */
    public List<String> attempts() {
        return attempts;
    }
}
