package org.verbs4j;

/**
 * One entry of a port's GID table ({@code struct ibv_gid_entry}).
 *
 * @param index      the GID index (what a queue pair's {@code sgid_index} names)
 * @param port       the port number
 * @param gid        the GID
 * @param type       its type: InfiniBand, RoCE v1 or RoCE v2
 * @param netdevIndex the ifindex of the net device it belongs to (RoCE), or 0
 */
public record GidEntry(int index, int port, Gid gid, GidType type, int netdevIndex) {}
