package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.generated.ibverbs.ibv_port_attr;

/**
 * What {@code ibv_query_port} says of a port (the full 52-byte {@code struct ibv_port_attr}).
 * A value.
 *
 * @param state          {@code enum ibv_port_state} (4 = ACTIVE)
 * @param stateText      libibverbs' text for it ({@code ibv_port_state_str})
 * @param maxMtu         the largest MTU the port supports
 * @param activeMtu      the MTU in use
 * @param gidTableLength entries in the GID table
 * @param lid            the base LID (InfiniBand; 0 on RoCE)
 * @param smLid          the subnet manager's LID
 * @param linkLayer      InfiniBand or Ethernet (RoCE)
 * @param activeWidth    {@code IBV_WIDTH_*} bits
 * @param activeSpeed    {@code IBV_SPEED_*} value
 * @param physState      the physical port state
 * @param portCapFlags   {@code IBV_PORT_*} capability bits
 * @param maxMsgSize     the largest message
 */
public record PortAttributes(
        int state,
        String stateText,
        Mtu maxMtu,
        Mtu activeMtu,
        int gidTableLength,
        int lid,
        int smLid,
        LinkLayer linkLayer,
        int activeWidth,
        int activeSpeed,
        int physState,
        int portCapFlags,
        long maxMsgSize,
        int pkeyTableLength) {
    /** {@code IBV_PORT_ACTIVE}. */
    public static final int STATE_ACTIVE = 4;

    static PortAttributes read(MemorySegment a) {
        int state = ibv_port_attr.state(a);
        return new PortAttributes(
                state,
                LibIbverbs.portStateStr(state),
                Mtu.of(ibv_port_attr.max_mtu(a)),
                Mtu.of(ibv_port_attr.active_mtu(a)),
                ibv_port_attr.gid_tbl_len(a),
                Short.toUnsignedInt(ibv_port_attr.lid(a)),
                Short.toUnsignedInt(ibv_port_attr.sm_lid(a)),
                LinkLayer.of(Byte.toUnsignedInt(ibv_port_attr.link_layer(a))),
                Byte.toUnsignedInt(ibv_port_attr.active_width(a)),
                Byte.toUnsignedInt(ibv_port_attr.active_speed(a)),
                Byte.toUnsignedInt(ibv_port_attr.phys_state(a)),
                ibv_port_attr.port_cap_flags(a),
                Integer.toUnsignedLong(ibv_port_attr.max_msg_sz(a)),
                Short.toUnsignedInt(ibv_port_attr.pkey_tbl_len(a)));
    }

    /** True when the port is ACTIVE. */
    public boolean isActive() {
        return state == STATE_ACTIVE;
    }

    /** True for RoCE (an Ethernet link layer): addressing is by GID, not LID. */
    public boolean isRoce() {
        return linkLayer == LinkLayer.ETHERNET;
    }
}
