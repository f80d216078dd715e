package org.verbs4j;

/** {@code enum ibv_gid_type}. */
public enum GidType {
    /** An InfiniBand GID. */
    INFINIBAND,
    /** RoCE v1: an Ethernet frame (ethertype 0x8915), not routable. */
    ROCE_V1,
    /** RoCE v2: UDP/IP (port 4791), routable. */
    ROCE_V2;

    /** The type for an {@code IBV_GID_TYPE_*} value. */
    public static GidType of(int value) {
        return switch (value) {
            case 0 -> INFINIBAND;
            case 1 -> ROCE_V1;
            case 2 -> ROCE_V2;
            default ->
                throw new InvalidRequestException("ibv_gid_type", "not an enum ibv_gid_type value: " + value, null);
        };
    }
}
