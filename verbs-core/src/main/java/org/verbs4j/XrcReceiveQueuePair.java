package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;

/**
 * The receiving end of XRC connections ({@link QueuePairType#XRC_RECV}, made by
 * {@link XrcDomain#createReceiveQueuePair}): a queue pair with no protection domain, no completion
 * queues and no queues of its own. A peer's {@link QueuePairType#XRC_SEND} queue pair connects to
 * it and names, in each request, the XRC shared receive queue of the same domain that receives it;
 * the receive completes on that SRQ's completion queue. Nothing is posted to it.
 *
 * <p>Owned by its {@link XrcDomain}, which refuses to close while it is open. Control path only;
 * thread-safe.
 */
public final class XrcReceiveQueuePair extends NativeResource {
    private final XrcDomain domain;
    private final int qpNumber;
    private volatile QueuePairState state = QueuePairState.RESET;

    XrcReceiveQueuePair(XrcDomain domain, MemorySegment qp, Destroyer destroy) {
        super(domain, "XRC receive queue pair", "ibv_destroy_qp", qp, destroy, null);
        this.domain = domain;
        this.qpNumber = qp.get(java.lang.foreign.ValueLayout.JAVA_INT, ObjectLayout.QP_QP_NUM);
    }

    /** The XRC domain it belongs to. */
    public XrcDomain domain() {
        return domain;
    }

    /** The QP number the sending peer connects to. */
    public int qpNumber() {
        return qpNumber;
    }

    /** The state as of the last transition made through this object. */
    public QueuePairState state() {
        return state;
    }

    /** This side's connection data on {@code port} for {@code gidIndex} (-1: LID only) and {@code psn}. */
    public QueuePairEndpoint localEndpoint(int port, int gidIndex, int psn) {
        Context ctx = domain.context();
        PortAttributes pa = ctx.queryPort(port);
        Gid gid = gidIndex >= 0 ? ctx.queryGid(port, gidIndex) : null;
        return new QueuePairEndpoint(qpNumber, psn & 0xffffff, pa.lid(), gid, pa.activeMtu());
    }

    /**
     * RESET→INIT→RTR on {@code port} against the peer's XRC_SEND queue pair {@code remote} (its
     * number and starting PSN), with the options' path and RNR timer. An XRC receiving end goes no
     * further than RTR.
     */
    public void connect(int port, QueuePairEndpoint remote, ConnectOptions o) {
        QueuePairTransitions.connectXrcReceiver(this, port, remote, o);
    }

    /** One {@code ibv_modify_qp} to {@code to} (its state already in {@code attr}) with the attributes {@code mask} names. */
    void modify(MemorySegment attr, int mask, QueuePairState to) {
        pin("ibv_modify_qp");
        try {
            LibIbverbs.modifyQp(handle, attr, mask);
        } catch (VerbsException e) {
            throw VerbsException.create(
                    "ibv_modify_qp",
                    e.errno(),
                    state + "->" + to + " of XRC_RECV QP " + qpNumber + " with attribute mask 0x"
                            + Integer.toHexString(mask) + " refused",
                    null);
        } finally {
            unpin();
        }
        state = to;
    }

    @Override
    String describe() {
        return "XrcReceiveQueuePair #" + qpNumber + " " + state + " on " + device();
    }
}
