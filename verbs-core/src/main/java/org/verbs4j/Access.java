package org.verbs4j;

import java.util.Set;

/**
 * Memory region access rights ({@code enum ibv_access_flags}). Registration is least-privilege:
 * with no flags a region can only be read locally (sent from); grant remote rights explicitly.
 */
public enum Access {
    /** {@code IBV_ACCESS_LOCAL_WRITE}: the adapter may write into it (receives, READ and atomic results). */
    LOCAL_WRITE(1),
    /** {@code IBV_ACCESS_REMOTE_WRITE}: peers may RDMA-write it (needs LOCAL_WRITE). */
    REMOTE_WRITE(2),
    /** {@code IBV_ACCESS_REMOTE_READ}: peers may RDMA-read it. */
    REMOTE_READ(4),
    /** {@code IBV_ACCESS_REMOTE_ATOMIC}: peers may run atomics on it (needs LOCAL_WRITE). */
    REMOTE_ATOMIC(8),
    /** {@code IBV_ACCESS_MW_BIND}. */
    MW_BIND(16),
    /** {@code IBV_ACCESS_ZERO_BASED}. */
    ZERO_BASED(32),
    /** {@code IBV_ACCESS_ON_DEMAND}: on-demand paging (not every device has it). */
    ON_DEMAND(64),
    /** {@code IBV_ACCESS_HUGETLB}. */
    HUGETLB(128),
    /**
     * {@code IBV_ACCESS_FLUSH_GLOBAL} (rdma-core 45): peers may RDMA FLUSH it to global visibility.
     * Refused where {@code device_cap_flags_ex} lacks {@code IB_UVERBS_DEVICE_FLUSH_GLOBAL} (rxe
     * before Linux 6.2).
     */
    FLUSH_GLOBAL(1 << 8),
    /**
     * {@code IBV_ACCESS_FLUSH_PERSISTENT} (rdma-core 45): peers may RDMA FLUSH it to persistence.
     * Refused where {@code device_cap_flags_ex} lacks {@code IB_UVERBS_DEVICE_FLUSH_PERSISTENT};
     * rxe takes it only for persistent memory (pmem), and refuses ordinary memory with EINVAL.
     */
    FLUSH_PERSISTENT(1 << 9),
    /** {@code IBV_ACCESS_RELAXED_ORDERING} (optional: a device may ignore it). */
    RELAXED_ORDERING(1 << 20);

    private final int bit;

    Access(int bit) {
        this.bit = bit;
    }

    /** The {@code IBV_ACCESS_*} bit. */
    public int bit() {
        return bit;
    }

    /** The C bit mask of a set of rights. */
    public static int mask(Set<Access> access) {
        int m = 0;
        for (Access a : access) {
            m |= a.bit;
        }
        return m;
    }
}
