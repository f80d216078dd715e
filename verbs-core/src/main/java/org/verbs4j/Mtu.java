package org.verbs4j;

/** The path MTUs of {@code enum ibv_mtu}. */
public enum Mtu {
    /** 256 bytes. */
    MTU_256(1, 256),
    /** 512 bytes. */
    MTU_512(2, 512),
    /** 1024 bytes (RoCE over a 1500-byte Ethernet MTU). */
    MTU_1024(3, 1024),
    /** 2048 bytes. */
    MTU_2048(4, 2048),
    /** 4096 bytes (RoCE over jumbo frames). */
    MTU_4096(5, 4096);

    private final int value;
    private final int bytes;

    Mtu(int value, int bytes) {
        this.value = value;
        this.bytes = bytes;
    }

    /** The {@code IBV_MTU_*} value. */
    public int value() {
        return value;
    }

    /** The MTU in bytes. */
    public int bytes() {
        return bytes;
    }

    /** The MTU for an {@code IBV_MTU_*} value. */
    public static Mtu of(int value) {
        for (Mtu m : values()) {
            if (m.value == value) {
                return m;
            }
        }
        throw new InvalidRequestException("ibv_mtu", "not an enum ibv_mtu value: " + value, "use 1 (256) to 5 (4096)");
    }

    /** The smaller of two MTUs. */
    public static Mtu min(Mtu a, Mtu b) {
        return a.value <= b.value ? a : b;
    }
}
