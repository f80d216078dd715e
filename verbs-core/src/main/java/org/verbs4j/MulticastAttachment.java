package org.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.LibIbverbs;

/**
 * The checks and the call of {@link QueuePair#attachMulticast} and {@link QueuePair#detachMulticast},
 * and the groups each queue pair is attached to: the kernel refuses to destroy an attached queue
 * pair (EBUSY), so {@link QueuePair#close()} detaches them first ({@link #detachAll}).
 */
final class MulticastAttachment {
    private record Group(Gid gid, int lid) {}

    private final java.util.Set<Group> groups = new java.util.LinkedHashSet<>(); // under this

    /** Detaches every group still attached (the queue pair is being closed: no pin); failures are logged. */
    synchronized void detachAll(QueuePair qp) {
        for (Group g : groups) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment gid = a.allocate(Gid.BYTES);
                g.gid().write(gid, 0);
                LibIbverbs.multicast(false, qp.handle, gid, g.lid());
            } catch (VerbsException e) {
                org.slf4j.LoggerFactory.getLogger(MulticastAttachment.class)
                        .warn("verbs4j: detaching {} from group {} on close: {}", qp, g.gid(), e.getMessage());
            }
        }
        groups.clear();
    }

    /** ff00::/8, or an IPv4-mapped ::ffff:224.0.0.0/4 address (RoCE v2). */
    static boolean isMulticast(byte[] g) {
        if ((g[0] & 0xff) == 0xff) {
            return true;
        }
        for (int i = 0; i < 10; i++) {
            if (g[i] != 0) {
                return false;
            }
        }
        return g[10] == (byte) 0xff && g[11] == (byte) 0xff && (g[12] & 0xf0) == 0xe0;
    }

    static void call(QueuePair qp, boolean attach, Gid group, int lid) {
        String verb = attach ? "ibv_attach_mcast" : "ibv_detach_mcast";
        if (group == null) {
            throw new InvalidRequestException(verb, "the group's GID is null", "pass the group's MGID (Gid.ofAddress)");
        }
        if (lid < 0 || lid > 0xffff) {
            throw new InvalidRequestException(
                    verb, "LID " + lid + " is not a 16-bit LID", "pass the group's MLID (0 on RoCE)");
        }
        if (!isMulticast(group.toBytes())) {
            throw new InvalidRequestException(
                    verb,
                    "GID " + group + " is not a multicast GID",
                    "pass the group's MGID: ff00::/8, or for RoCE v2 over IPv4 the mapped group address"
                            + " (Gid.ofAddress of a 224.0.0.0/4 address)");
        }
        qp.pin(verb); // refuses a closed queue pair; a close meanwhile waits (EBUSY)
        try {
            if (qp.type() != QueuePairType.UD) {
                throw new InvalidRequestException(
                        verb,
                        qp.type() + " queue pair " + qp.qpNumber() + ": only UD queue pairs join multicast groups",
                        "attach a UD queue pair (QueuePairType.UD)");
            }
            try (Arena a = Arena.ofConfined()) {
                MemorySegment gid = a.allocate(Gid.BYTES);
                group.write(gid, 0);
                synchronized (qp.multicast) {
                    LibIbverbs.multicast(attach, qp.handle, gid, lid);
                    if (attach) {
                        qp.multicast.groups.add(new Group(group, lid));
                    } else {
                        qp.multicast.groups.remove(new Group(group, lid));
                    }
                }
            } catch (VerbsException e) {
                throw VerbsException.create(
                        verb,
                        e.errno(),
                        "UD queue pair " + qp.qpNumber() + (attach ? " to " : " from ") + "group " + group + " (LID "
                                + lid + ") refused",
                        attach
                                ? "check that the device supports multicast (max_mcast_grp) and that the GID is a"
                                        + " multicast GID"
                                : "detach only a group the queue pair was attached to");
            }
        } finally {
            qp.unpin();
        }
    }
}
