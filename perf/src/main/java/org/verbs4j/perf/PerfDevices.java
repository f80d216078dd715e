package org.verbs4j.perf;

import java.io.IOException;
import java.io.PrintStream;
import java.net.DatagramSocket;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.List;
import java.util.Optional;
import org.verbs4j.Context;
import org.verbs4j.DeviceAttributes;
import org.verbs4j.DeviceInfo;
import org.verbs4j.GidEntry;
import org.verbs4j.GidType;
import org.verbs4j.PortAttributes;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;

/**
 * {@code verbs-perf devices} (every device, port and GID) and the choice of the GID index of a
 * run when {@code -x} is not given. Stateless; any thread.
 */
final class PerfDevices {
    private static final PrintStream OUT = System.out;

    private PerfDevices() {}

    // ---- devices ---------------------------------------------------------------------------

    static int devices() {
        List<DeviceInfo> list = Verbs.devices();
        if (list.isEmpty()) {
            OUT.println("No RDMA device: " + Verbs.unavailabilityCause().orElse("none listed"));
            return 1;
        }
        for (DeviceInfo d : list) {
            OUT.printf(
                    "device %s: node type %s, transport %d, node GUID %016x%n",
                    d.name(), d.nodeTypeText(), d.transportType(), d.guid());
            try (Context ctx = Verbs.open(d.name())) {
                DeviceAttributes a = ctx.queryDevice();
                OUT.printf(
                        "  fw_ver %s, vendor 0x%x part %d hw_ver 0x%x, sys image GUID %016x, phys ports %d%n",
                        a.firmwareVersion(),
                        a.vendorId(),
                        a.vendorPartId(),
                        a.hardwareVersion(),
                        a.sysImageGuid(),
                        a.physPortCount());
                OUT.printf(
                        "  max_qp %d, max_qp_wr %d, max_sge %d, max_sge_rd %d, max_cq %d, max_cqe %d%n",
                        a.maxQp(), a.maxQpWr(), a.maxSge(), a.maxSgeRd(), a.maxCq(), a.maxCqe());
                OUT.printf(
                        "  max_mr %d, max_mr_size 0x%x, page_size_cap 0x%x, max_pd %d, max_mw %d, max_ah %d%n",
                        a.maxMr(), a.maxMrSize(), a.pageSizeCap(), a.maxPd(), a.maxMw(), a.maxAh());
                OUT.printf(
                        "  max_qp_rd_atom %d, max_qp_init_rd_atom %d, atomic_cap %s, max_srq %d, max_srq_wr %d, "
                                + "max_srq_sge %d, max_pkeys %d, device_cap_flags 0x%x%n",
                        a.maxQpRdAtom(),
                        a.maxQpInitRdAtom(),
                        atomicCap(a.atomicCap()),
                        a.maxSrq(),
                        a.maxSrqWr(),
                        a.maxSrqSge(),
                        a.maxPkeys(),
                        a.deviceCapFlags());
                OUT.printf("  completion vectors %d%n", ctx.numCompVectors());
                for (int port = 1; port <= a.physPortCount(); port++) {
                    PortAttributes p = ctx.queryPort(port);
                    OUT.printf(
                            "  port %d: %s (%d), phys state %s, link layer %s, max MTU %d, active MTU %d, "
                                    + "speed %s x width %s = %s, lid %d, sm_lid %d, max_msg_sz 0x%x, cap flags 0x%x%n",
                            port,
                            p.stateText(),
                            p.state(),
                            physState(p.physState()),
                            p.linkLayer(),
                            p.maxMtu().bytes(),
                            p.activeMtu().bytes(),
                            speedText(p.activeSpeed()),
                            widthText(p.activeWidth()),
                            linkRate(p.activeSpeed(), p.activeWidth()),
                            p.lid(),
                            p.smLid(),
                            p.maxMsgSize(),
                            p.portCapFlags());
                    List<GidEntry> gids = ctx.gidTable(port);
                    OUT.printf("    GID table: %d of %d entries populated%n", gids.size(), p.gidTableLength());
                    for (GidEntry g : gids) {
                        OUT.printf(
                                "    GID[%3d] %s  %-10s %s%s%n",
                                g.index(),
                                g.gid(),
                                gidType(g.type()),
                                ipv4Of(g).map(ip -> "(" + ip + ") ").orElse(""),
                                g.netdevIndex() > 0 ? "netdev " + netdevName(g.netdevIndex()) : "");
                    }
                }
            } catch (VerbsException e) {
                OUT.println("  cannot query: " + e.getMessage());
            }
        }
        return 0;
    }

    private static String atomicCap(int cap) {
        return switch (cap) {
            case 0 -> "NONE";
            case 1 -> "HCA";
            case 2 -> "GLOB";
            default -> String.valueOf(cap);
        };
    }

    private static String physState(int s) {
        return switch (s) {
            case 1 -> "SLEEP";
            case 2 -> "POLLING";
            case 3 -> "DISABLED";
            case 4 -> "PORT_CONFIGURATION_TRAINING";
            case 5 -> "LINK_UP";
            case 6 -> "LINK_ERROR_RECOVERY";
            case 7 -> "PHY_TEST";
            default -> String.valueOf(s);
        };
    }

    /** {@code IBV_SPEED_*}: the per-lane rate in Gb/s. */
    static double laneGbps(int speed) {
        return switch (speed) {
            case 1 -> 2.5;
            case 2 -> 5.0;
            case 4 -> 10.0;
            case 8 -> 10.3125;
            case 16 -> 14.0625;
            case 32 -> 25.78125;
            case 64 -> 53.125;
            case 128 -> 106.25;
            case 256 -> 212.5;
            default -> 0;
        };
    }

    static String speedText(int speed) {
        String name = switch (speed) {
            case 1 -> "SDR";
            case 2 -> "DDR";
            case 4 -> "QDR";
            case 8 -> "FDR10";
            case 16 -> "FDR";
            case 32 -> "EDR";
            case 64 -> "HDR";
            case 128 -> "NDR";
            case 256 -> "XDR";
            default -> "speed " + speed;
        };
        double g = laneGbps(speed);
        return g > 0 ? name + " (" + fmt(g) + " Gb/s per lane)" : name;
    }

    static int lanes(int width) {
        return switch (width) {
            case 1 -> 1;
            case 2 -> 4;
            case 4 -> 8;
            case 8 -> 12;
            case 16 -> 2;
            default -> 0;
        };
    }

    static String widthText(int width) {
        int l = lanes(width);
        return l > 0 ? l + "X" : "width " + width;
    }

    static String linkRate(int speed, int width) {
        double r = laneGbps(speed) * lanes(width);
        return r > 0 ? fmt(r) + " Gb/s" : "unknown rate";
    }

    private static String fmt(double v) {
        return v == Math.rint(v) ? String.valueOf((long) v) : String.valueOf(v);
    }

    private static String gidType(GidType t) {
        return switch (t) {
            case INFINIBAND -> "IB";
            case ROCE_V1 -> "RoCE v1";
            case ROCE_V2 -> "RoCE v2";
        };
    }

    static Optional<String> ipv4Of(GidEntry g) {
        byte[] b = g.gid().toBytes();
        for (int i = 0; i < 10; i++) {
            if (b[i] != 0) {
                return Optional.empty();
            }
        }
        if (b[10] != (byte) 0xff || b[11] != (byte) 0xff) {
            return Optional.empty();
        }
        return Optional.of((b[12] & 0xff) + "." + (b[13] & 0xff) + "." + (b[14] & 0xff) + "." + (b[15] & 0xff));
    }

    private static String netdevName(int ifindex) {
        try {
            NetworkInterface ni = NetworkInterface.getByIndex(ifindex);
            return ni != null ? ni.getName() : "#" + ifindex;
        } catch (SocketException e) {
            return "#" + ifindex;
        }
    }

    // ---- GID selection ---------------------------------------------------------------------

    /** The GID index to use (-1: LID routing on InfiniBand), and why, for the header line. */
    record GidChoice(int index, String description) {}

    static GidChoice chooseGid(Context ctx, int port, int gidIndex, InetAddress peer) {
        PortAttributes pa = ctx.queryPort(port);
        if (gidIndex >= 0) {
            return new GidChoice(gidIndex, "GID index " + gidIndex + " (-x) " + ctx.queryGid(port, gidIndex));
        }
        if (!pa.isRoce()) {
            return new GidChoice(-1, "LID " + pa.lid() + " (InfiniBand)");
        }
        if (peer != null) {
            InetAddress local = localAddressTowards(peer);
            if (local instanceof Inet4Address && !local.isAnyLocalAddress()) {
                try {
                    GidEntry e = ctx.roceV2Gid(port, local);
                    return new GidChoice(
                            e.index(),
                            "GID index " + e.index() + " (RoCE v2 of " + local.getHostAddress()
                                    + ", the local address towards " + peer.getHostAddress() + ")");
                } catch (VerbsException ignored) {
                    // fall through to the local-interface and first-entry choices
                }
            }
        }
        List<GidEntry> table = ctx.gidTable(port);
        for (GidEntry e : table) {
            Optional<String> ip = ipv4Of(e);
            if (e.type() == GidType.ROCE_V2 && ip.isPresent() && isLocalAddress(ip.get())) {
                return new GidChoice(e.index(), "GID index " + e.index() + " (RoCE v2 of local IPv4 " + ip.get() + ")");
            }
        }
        GidEntry first = ctx.firstRoceV2Ipv4Gid(port)
                .orElseThrow(() -> new VerbsException(
                        "ibv_query_gid_ex",
                        org.verbs4j.natives.Errno.ENOENT,
                        "port " + port + " of " + ctx.deviceName() + " has no RoCE v2 IPv4 GID (table: " + table + ")",
                        "give its net device an IPv4 address, or pass -x"));
        return new GidChoice(
                first.index(),
                "GID index " + first.index() + " (first RoCE v2 IPv4 GID "
                        + ipv4Of(first).orElse("?") + ")");
    }

    private static InetAddress localAddressTowards(InetAddress peer) {
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(peer, 9); // no packet is sent: this only asks the kernel for the route's source address
            return s.getLocalAddress();
        } catch (IOException e) {
            return null;
        }
    }

    private static boolean isLocalAddress(String ip) {
        try {
            return NetworkInterface.getByInetAddress(InetAddress.getByName(ip)) != null;
        } catch (IOException e) {
            return false;
        }
    }
}
