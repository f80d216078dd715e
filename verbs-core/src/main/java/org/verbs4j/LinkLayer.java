package org.verbs4j;

/** The link layer of a port ({@code IBV_LINK_LAYER_*}). */
public enum LinkLayer {
    /** Not reported (older providers: InfiniBand). */
    UNSPECIFIED,
    /** InfiniBand: LID addressing on a subnet. */
    INFINIBAND,
    /** Ethernet: RoCE, GID addressing. */
    ETHERNET;

    /** The link layer for an {@code IBV_LINK_LAYER_*} value. */
    public static LinkLayer of(int value) {
        return switch (value) {
            case 1 -> INFINIBAND;
            case 2 -> ETHERNET;
            default -> UNSPECIFIED;
        };
    }
}
