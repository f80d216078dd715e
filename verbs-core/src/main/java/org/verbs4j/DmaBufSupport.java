package org.verbs4j;

/**
 * Whether a verbs device accepts dma-buf registrations ({@code ibv_reg_dmabuf_mr}), found the
 * way NCCL finds it: a registration of fd -1 that the provider answers with EBADF (it got as far
 * as looking at the fd) means supported; EOPNOTSUPP or EPROTONOSUPPORT means the provider or the
 * kernel driver does not implement it. Made by {@link ProtectionDomain#probeDmaBuf()}. Immutable.
 *
 * @param verdict what the probe concluded
 * @param errno   the errno the probe's registration answered (0 when none was attempted)
 * @param reason  the finding in plain words, with what it means for GPU memory
 */
public record DmaBufSupport(Verdict verdict, int errno, String reason) {

    /** The probe's conclusion. */
    public enum Verdict {
        /** The provider accepts dma-buf registrations. */
        SUPPORTED,
        /** The provider or its kernel driver does not implement them (EOPNOTSUPP / EPROTONOSUPPORT). */
        NOT_SUPPORTED,
        /** The system's libibverbs predates {@code ibv_reg_dmabuf_mr} (rdma-core 34, IBVERBS_1.12). */
        LIBIBVERBS_TOO_OLD,
        /** The probe answered something unexpected (see the errno). */
        UNKNOWN
    }

    /** Whether {@code ibv_reg_dmabuf_mr} can be expected to work on this device. */
    public boolean supported() {
        return verdict == Verdict.SUPPORTED;
    }
}
