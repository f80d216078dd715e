package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.generated.ibverbs.ibv_device_attr;

/**
 * What {@code ibv_query_device} says of a device (the commonly used part of
 * {@code struct ibv_device_attr}). A value. {@code maxMrSize} and {@code pageSizeCap} are
 * unsigned 64-bit values (rxe reports {@code max_mr_size} as 2^64-1, which reads as -1 here:
 * compare with {@link Long#compareUnsigned}).
 */
public record DeviceAttributes(
        String firmwareVersion,
        long nodeGuid,
        long sysImageGuid,
        long maxMrSize,
        long pageSizeCap,
        int vendorId,
        int vendorPartId,
        int hardwareVersion,
        int maxQp,
        int maxQpWr,
        int deviceCapFlags,
        int maxSge,
        int maxSgeRd,
        int maxCq,
        int maxCqe,
        int maxMr,
        int maxPd,
        int maxQpRdAtom,
        int maxQpInitRdAtom,
        int atomicCap,
        int maxMw,
        int maxAh,
        int maxSrq,
        int maxSrqWr,
        int maxSrqSge,
        int maxPkeys,
        int physPortCount) {

    /** {@code IBV_ATOMIC_NONE}: the device has no atomics. */
    public static final int ATOMIC_NONE = 0;

    static DeviceAttributes read(MemorySegment a) {
        return new DeviceAttributes(
                ibv_device_attr.fw_ver(a).getString(0),
                Long.reverseBytes(ibv_device_attr.node_guid(a)),
                Long.reverseBytes(ibv_device_attr.sys_image_guid(a)),
                ibv_device_attr.max_mr_size(a),
                ibv_device_attr.page_size_cap(a),
                ibv_device_attr.vendor_id(a),
                ibv_device_attr.vendor_part_id(a),
                ibv_device_attr.hw_ver(a),
                ibv_device_attr.max_qp(a),
                ibv_device_attr.max_qp_wr(a),
                ibv_device_attr.device_cap_flags(a),
                ibv_device_attr.max_sge(a),
                ibv_device_attr.max_sge_rd(a),
                ibv_device_attr.max_cq(a),
                ibv_device_attr.max_cqe(a),
                ibv_device_attr.max_mr(a),
                ibv_device_attr.max_pd(a),
                ibv_device_attr.max_qp_rd_atom(a),
                ibv_device_attr.max_qp_init_rd_atom(a),
                ibv_device_attr.atomic_cap(a),
                ibv_device_attr.max_mw(a),
                ibv_device_attr.max_ah(a),
                ibv_device_attr.max_srq(a),
                ibv_device_attr.max_srq_wr(a),
                ibv_device_attr.max_srq_sge(a),
                Short.toUnsignedInt(ibv_device_attr.max_pkeys(a)),
                Byte.toUnsignedInt(ibv_device_attr.phys_port_cnt(a)));
    }

    /** True when the device supports atomic operations. */
    public boolean supportsAtomics() {
        return atomicCap != ATOMIC_NONE;
    }
}
