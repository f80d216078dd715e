package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.generated.ibverbs.ibv_ah_attr;
import org.verbs4j.natives.generated.ibverbs.ibv_global_route;

/**
 * Where packets go ({@code struct ibv_ah_attr}): for an address handle (UD) or a connected
 * queue pair's path. RoCE always routes globally (a GID and the local GID index); InfiniBand
 * within a subnet uses the LID. A value.
 */
public record AddressVector(
        int port, int dlid, Gid dgid, int sgidIndex, int hopLimit, int trafficClass, int serviceLevel) {

    /** A RoCE v2 / global route to {@code dgid} through the local GID index {@code sgidIndex}. */
    public static AddressVector global(int port, Gid dgid, int sgidIndex) {
        return new AddressVector(port, 0, dgid, sgidIndex, 64, 0, 0);
    }

    /** An InfiniBand route to {@code dlid} within the subnet. */
    public static AddressVector lid(int port, int dlid) {
        return new AddressVector(port, dlid, null, 0, 0, 0, 0);
    }

    /** True when it routes by GID (a GRH is present). */
    public boolean isGlobal() {
        return dgid != null;
    }

    /** Writes it into a {@code struct ibv_ah_attr}. */
    void write(MemorySegment ah) {
        ah.fill((byte) 0);
        ibv_ah_attr.dlid(ah, (short) dlid);
        ibv_ah_attr.sl(ah, (byte) serviceLevel);
        ibv_ah_attr.port_num(ah, (byte) port);
        if (dgid != null) {
            ibv_ah_attr.is_global(ah, (byte) 1);
            MemorySegment grh = ibv_ah_attr.grh(ah);
            dgid.write(grh, ibv_global_route.dgid$offset());
            ibv_global_route.sgid_index(grh, (byte) sgidIndex);
            ibv_global_route.hop_limit(grh, (byte) hopLimit);
            ibv_global_route.traffic_class(grh, (byte) trafficClass);
        }
    }
}
