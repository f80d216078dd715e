package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.AddressHandle;
import org.verbs4j.Gid;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairType;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibRdmacm;

/**
 * Membership of one UD multicast group through librdmacm ({@code rdma_join_multicast} on an
 * RDMA_PS_UDP cm id bound to a local address): the caller's UD {@link QueuePair} is attached to
 * the group ({@code ibv_attach_mcast}) and so receives what is sent to it, and
 * {@link #addressHandle()}, {@link #remoteQpn()} (0xFFFFFF) and {@link #remoteQkey()} are what a
 * UD SEND to the group names ({@code wrs.send(..).destination(g.addressHandle(), g.remoteQpn(),
 * g.remoteQkey())}). The queue pair must be UD, on the device of the local address, and
 * activated with the Q_Key {@link #QKEY} (the connection manager's for RDMA_PS_UDP).
 *
 * <p>{@link #leave()} detaches the queue pair, leaves the group and closes the address handle: a
 * chain that names it is refused from then on (a send already posted is not affected: the
 * provider read the handle when it was posted). {@link #close()} leaves, then destroys the cm id.
 * Both work in any state, from any thread, more than once. Owns the cm id and the address handle,
 * not the queue pair. An unclosed group that becomes unreachable is reported and its id destroyed
 * (which leaves the group).
 */
public final class MulticastGroup extends CmEndpoint implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(MulticastGroup.class);

    /** The Q_Key of RDMA_PS_UDP ({@code RDMA_UDP_QKEY}): the queue pair's, and what senders name. */
    public static final int QKEY = 0x01234567;

    /** The queue pair number of a multicast destination. */
    public static final int MULTICAST_QPN = 0xFFFFFF;

    private enum Membership {
        JOINING,
        JOINED,
        FAILED,
        LEFT,
        CLOSED
    }

    private final InetAddress group;
    private final QueuePair qp;
    private Membership state = Membership.JOINING; // under lock
    private CmEvent failure; // under lock
    private CmStructs.UdParams joined; // under lock
    private boolean attached; // under lock
    private volatile AddressHandle addressHandle;

    private MulticastGroup(CmEventChannel channel, CmEventChannel.IdState id, InetAddress group, QueuePair qp) {
        super(channel, id);
        this.group = group;
        this.qp = qp;
        reportLeaks("multicast group " + group.getHostAddress(), false);
    }

    /**
     * Joins {@code group} (an IPv4 or IPv6 multicast address) from {@code local} (an address of
     * an RDMA device) with {@code qp} attached: returns once the join completed
     * (RDMA_CM_EVENT_MULTICAST_JOIN), within {@code timeout}; throws {@link VerbsException} naming
     * {@code rdma_join_multicast} on MULTICAST_ERROR, {@link VerbsTimeoutException} when the time
     * ran out, {@link InvalidRequestException} for a non-multicast group, a queue pair that is not
     * UD, on another device or with another Q_Key. On any failure nothing stays joined.
     */
    public static MulticastGroup join(
            CmEventChannel channel, InetAddress local, InetAddress group, QueuePair qp, Duration timeout) {
        String verb = "rdma_join_multicast";
        if (local == null || group == null || qp == null || timeout == null) {
            throw new InvalidRequestException(
                    verb, "the local address, group, queue pair and timeout must not be null", "pass all four");
        }
        if (!group.isMulticastAddress()) {
            throw new InvalidRequestException(
                    verb,
                    group.getHostAddress() + " is not a multicast address",
                    "pass an IPv4 group (224.0.0.0/4, e.g. 239.x.y.z) or an IPv6 ff00::/8 group");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new InvalidRequestException(verb, "timeout " + timeout + " is not positive", "pass a positive bound");
        }
        if (!qp.isOpen()) {
            throw new ResourceClosedException(verb, "the queue pair is closed", "join with an open UD queue pair");
        }
        if (qp.type() != QueuePairType.UD) {
            throw new InvalidRequestException(
                    verb,
                    qp.type() + " queue pair " + qp.qpNumber() + ": only UD queue pairs join multicast groups",
                    "create the queue pair with QueuePairType.UD and activate it with MulticastGroup.QKEY");
        }
        MulticastGroup g = new MulticastGroup(channel, channel.createId(LibRdmacm.RDMA_PS_UDP), group, qp);
        g.register();
        try {
            g.start(local);
            g.awaitJoined(timeout);
            return g;
        } catch (RuntimeException | Error e) {
            g.close();
            throw e;
        }
    }

    /** Binds the id to {@code local}, checks the queue pair against its device, then asks to join. */
    private void start(InetAddress local) {
        channel.lock.lock();
        try (Arena a = Arena.ofConfined()) {
            if (idDestroyed()) {
                throw closed("rdma_join_multicast");
            }
            String device = CmDevices.bind(id, local).context().deviceName();
            String qpDevice = qp.protectionDomain().context().deviceName();
            if (!device.equals(qpDevice)) {
                throw new InvalidRequestException(
                        "rdma_join_multicast",
                        "the queue pair is on " + qpDevice + ", " + local.getHostAddress() + " on " + device,
                        "create the queue pair on " + device + " (CmEventChannel.deviceContext(local))");
            }
            int qkey = qp.query().qkey();
            if (qkey != QKEY) {
                throw new InvalidRequestException(
                        "rdma_join_multicast",
                        "UD queue pair " + qp.qpNumber() + " has Q_Key 0x" + Integer.toHexString(qkey)
                                + "; the group's is 0x" + Integer.toHexString(QKEY),
                        "activate the queue pair with MulticastGroup.QKEY (qp.activateUd(port, MulticastGroup.QKEY, 0))");
            }
            LibRdmacm.joinMulticast(id, CmStructs.sockaddr(a, new InetSocketAddress(group, 0)));
        } finally {
            channel.lock.unlock();
        }
    }

    private void awaitJoined(Duration timeout) {
        Membership s = await(
                timeout,
                () -> state == Membership.JOINING ? null : state,
                () -> new VerbsTimeoutException(
                        "rdma_join_multicast",
                        "group " + group.getHostAddress() + " not joined within " + timeout,
                        "allow more time, and check that the channel's events are read (processEvents on a"
                                + " polled channel)"));
        CmStructs.UdParams p;
        synchronized (lock) {
            if (s != Membership.JOINED) {
                CmEvent f = failure;
                if (f == null) {
                    throw closed("rdma_join_multicast");
                }
                throw VerbsException.create(
                        "rdma_join_multicast",
                        f.status() < 0 ? -f.status() : Errno.EIO,
                        "group " + group.getHostAddress() + ": " + f,
                        "check that the device's port is active and the group address is routable from the"
                                + " local address (rdma link show; ip route get " + group.getHostAddress() + ")");
            }
            p = joined;
        }
        AddressHandle ah = qp.protectionDomain().createAddressHandle(p.vector());
        synchronized (lock) {
            if (state != Membership.JOINED) { // closed or left meanwhile
                ah.close();
                throw closed("rdma_join_multicast");
            }
            addressHandle = ah;
            qp.attachMulticast(p.vector().dgid(), p.vector().dlid());
            attached = true;
        }
    }

    @Override
    void handle(CmStructs.Copied raw, CmEvent event) {
        synchronized (lock) {
            CmEventType t = event.type();
            if (state == Membership.JOINING && t == CmEventType.MULTICAST_JOIN) {
                joined = raw.ud();
                state = Membership.JOINED;
            } else if (state == Membership.JOINING
                    && (t == CmEventType.MULTICAST_ERROR || t == CmEventType.DEVICE_REMOVAL)) {
                failure = event;
                state = Membership.FAILED;
            } else {
                LOG.debug("multicast group {} ({}): {}", group, state, event);
            }
            lock.notifyAll();
        }
    }

    private ResourceClosedException closed(String verb) {
        return new ResourceClosedException(
                verb,
                "multicast group " + group.getHostAddress() + " was left or closed",
                "join the group again (MulticastGroup.join)");
    }

    // ---- accessors ---------------------------------------------------------------------------

    /** The group's address, as joined. */
    public InetAddress group() {
        return group;
    }

    /** The queue pair attached to the group (the caller's: not closed with the group). */
    public QueuePair queuePair() {
        return qp;
    }

    /** Whether the group is joined (not yet left or closed). */
    public boolean isJoined() {
        synchronized (lock) {
            return state == Membership.JOINED;
        }
    }

    /** The address handle to the group, in the queue pair's protection domain (closed on leave). */
    public AddressHandle addressHandle() {
        return addressHandle;
    }

    /** The QPN a SEND to the group names: {@link #MULTICAST_QPN}, as the join event gives it. */
    public int remoteQpn() {
        synchronized (lock) {
            return joined == null ? -1 : joined.qpNumber();
        }
    }

    /** The Q_Key a SEND to the group names, as the join event gives it (0 before). */
    public int remoteQkey() {
        synchronized (lock) {
            return joined == null ? 0 : joined.qkey();
        }
    }

    /** The group's GID (MGID; for RoCE v2 over IPv4 the IPv4-mapped group address), null before joined. */
    public Gid mgid() {
        synchronized (lock) {
            return joined == null ? null : joined.vector().dgid();
        }
    }

    /** The group's LID (MLID; 0 on RoCE). */
    public int mlid() {
        synchronized (lock) {
            return joined == null ? 0 : joined.vector().dlid();
        }
    }

    // ---- leave and close ---------------------------------------------------------------------

    /**
     * Leaves the group: detaches the queue pair ({@code ibv_detach_mcast}), {@code
     * rdma_leave_multicast}, closes the address handle (posts naming it are refused from then on).
     * Does nothing if not joined. Idempotent.
     */
    public void leave() {
        leave(Membership.LEFT);
    }

    private void leave(Membership to) {
        boolean wasJoined, detach;
        synchronized (lock) {
            if (state == Membership.CLOSED || state == Membership.LEFT && to == Membership.LEFT) {
                return;
            }
            wasJoined = state == Membership.JOINED;
            detach = attached;
            attached = false;
            state = to;
            lock.notifyAll();
        }
        if (detach && qp.isOpen()) {
            try {
                Gid mgid;
                int mlid;
                synchronized (lock) {
                    mgid = joined.vector().dgid();
                    mlid = joined.vector().dlid();
                }
                qp.detachMulticast(mgid, mlid);
            } catch (VerbsException x) {
                LOG.warn("verbs4j: detaching the queue pair from group {}: {}", group, x.getMessage());
            }
        }
        if (wasJoined) {
            channel.lock.lock();
            try (Arena a = Arena.ofConfined()) {
                if (!idDestroyed()) {
                    LibRdmacm.leaveMulticast(id, CmStructs.sockaddr(a, new InetSocketAddress(group, 0)));
                }
            } catch (VerbsException x) {
                LOG.warn("verbs4j: leaving group {}: {}", group, x.getMessage());
            } finally {
                channel.lock.unlock();
            }
        }
        AddressHandle ah = addressHandle;
        if (ah != null && ah.isOpen()) {
            ah.close(); // waits until no post of its protection domain is inside the provider
        }
    }

    /** Leaves the group (if joined), then destroys the cm id. Idempotent. */
    @Override
    public void close() {
        leave(Membership.CLOSED);
        destroyId();
    }

    @Override
    public String toString() {
        synchronized (lock) {
            return "MulticastGroup(" + group.getHostAddress() + ", " + state + ")";
        }
    }
}
