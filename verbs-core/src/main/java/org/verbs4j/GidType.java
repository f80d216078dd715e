package org.verbs4j;

/** {@code enum ibv_gid_type}. */
public enum GidType {
    INFINIBAND, ROCE_V1, ROCE_V2;

    /** The type for an {@code IBV_GID_TYPE_*} value. */
    public static GidType of(int value) {
        return switch (value) {
            case 0 -> INFINIBAND;
            case 1 -> ROCE_V1;
            case 2 -> ROCE_V2;
            default -> throw new InvalidRequestException("ibv_gid_type", "not an enum ibv_gid_type value: " + value, null);
        };
    }
}
