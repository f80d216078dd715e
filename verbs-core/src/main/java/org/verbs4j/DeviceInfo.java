package org.verbs4j;

/**
 * One entry of the device list: what {@code ibv_get_device_name}, {@code ibv_get_device_guid}
 * and {@code struct ibv_device} say. A value; open the device with {@link Verbs#open(String)}.
 *
 * @param name          the device name, e.g. {@code rxe0}
 * @param guid          the node GUID in host byte order
 * @param nodeType      {@code enum ibv_node_type}
 * @param nodeTypeText  libibverbs' text for the node type ({@code ibv_node_type_str})
 * @param transportType {@code enum ibv_transport_type}
 */
public record DeviceInfo(String name, long guid, int nodeType, String nodeTypeText, int transportType) {
    @Override
    public String toString() {
        return name + " (" + nodeTypeText + ", guid " + String.format("%016x", guid) + ")";
    }
}
