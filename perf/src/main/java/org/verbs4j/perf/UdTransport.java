package org.verbs4j.perf;

import java.io.PrintStream;
import java.util.Arrays;
import org.verbs4j.AddressHandle;
import org.verbs4j.AddressVector;
import org.verbs4j.Gid;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePairEndpoint;

/**
 * {@code -c UD}: perftest 4.5's rules for unreliable datagrams (send_bw and send_lat only),
 * written from reading perftest's source, not copied, so that either side may be perftest:
 * <ul>
 * <li>only SEND tests (perftest: "UD connection only possible in SEND verb"), not with {@code -R}
 * in this build (perftest's rdma_cm UD mode, with its UDP port space and address handles from
 * rdma_cm events, is not implemented here);</li>
 * <li>the Q_Key of every QP and every send is {@value #QKEY_HEX} (perftest's {@code DEF_QKEY});
 * the QP goes RESET→INIT→RTR→RTS by itself ({@code activateUd}) with this side's PSN;</li>
 * <li>the destination is an address handle built from the peer's connection record: the GID
 * (hop limit 255, traffic class 0, this side's GID index) or, without a GID index, the LID;</li>
 * <li>a message is at most the negotiated MTU: a larger default size (or {@code -a}) is cut to it,
 * a larger {@code -s} is refused (perftest: "Max message size in UD cannot be greater than MTU");</li>
 * <li>each receive is {@value #GRH} bytes longer than the message (the Global Route Header lands
 * first) and starts {@value #GRH} bytes before a cache line, so the payload is cache-line aligned;</li>
 * <li>the default receive depth (512) becomes the iteration count, at most {@value #MAX_RX_DEPTH}
 * (every receive posted before the sender starts, as UD has no flow control), inline data is at
 * most {@value #MAX_INLINE} bytes (188 by default in send_lat on devices perftest knows), and CQ
 * moderation is not turned off for large messages.</li>
 * </ul>
 * Static rules and setup; used by the one thread of a run.
 */
final class UdTransport {
    /** perftest's Q_Key ({@code DEF_QKEY}). */
    static final int QKEY = 0x11111111;

    static final String QKEY_HEX = "0x11111111";
    /** Bytes of the Global Route Header at the start of every UD receive buffer. */
    static final int GRH = 40;
    /** perftest's largest inline size on UD ({@code MAX_INLINE_UD}). */
    static final int MAX_INLINE = 884;
    /** perftest's default inline size of send_lat on UD ({@code DEF_INLINE_SEND_UD}). */
    static final int DEFAULT_INLINE_LAT = 188;
    /** perftest's bound on the receive depth it derives for UD and UC ({@code UC_MAX_RX}). */
    static final int MAX_RX_DEPTH = 16000;
    /** perftest's default receive depth of SEND tests ({@code DEF_RX_SEND}). */
    static final int DEFAULT_RX_DEPTH = 512;
    /** perftest's hop limit in the address handle. */
    static final int HOP_LIMIT = 255;

    private UdTransport() {}

    /** The checks of {@code -c UD} that need no device; throws with perftest's reason. */
    static void check(PerfTest test, boolean rdmaCm) {
        if (test.verb() != PerfTest.Verb.SEND) {
            throw new IllegalArgumentException("-c UD: UD connection only possible in SEND verb (perftest refuses "
                    + test.perftestBinary()
                    + " -c UD too: an unreliable datagram carries no RDMA WRITE, READ or atomic); "
                    + "use send_bw or send_lat");
        }
        if (rdmaCm) {
            throw new UnsupportedOperationException(
                    "-R with -c UD is not available in this build (perftest's rdma_cm UD "
                            + "mode is not implemented); drop -R to use perftest's TCP exchange with UD");
        }
    }

    /**
     * The receive depth perftest derives: the default ({@value #DEFAULT_RX_DEPTH}) becomes the
     * iteration count, at most {@value #MAX_RX_DEPTH}; a depth given otherwise stays.
     */
    static int rxDepth(int rxDepth, long iterations) {
        return rxDepth == DEFAULT_RX_DEPTH ? (int) Math.min(iterations, MAX_RX_DEPTH) : rxDepth;
    }

    /** The inline size on UD: at most {@value #MAX_INLINE} (perftest says so and cuts it). */
    static int inline(int inline, PrintStream err) {
        if (inline > MAX_INLINE) {
            err.printf("Setting inline size to %d (Max inline size in UD)%n", MAX_INLINE);
            return MAX_INLINE;
        }
        return inline;
    }

    /**
     * The sizes of a UD run once the MTU is known: with {@code -a} the sizes up to the MTU, a
     * default size above it cut to it (both with perftest's note on {@code err}); an explicit
     * {@code -s} above it is refused.
     */
    static int[] fitToMtu(int[] sizes, boolean all, boolean sizeGiven, int mtuBytes, PrintStream err) {
        if (all) {
            int[] fit = Arrays.stream(sizes).filter(s -> s <= mtuBytes).toArray();
            if (fit.length < sizes.length) {
                err.printf(" Max msg size in UD is MTU %d%n Changing to this MTU%n", mtuBytes);
            }
            return fit;
        }
        int s = sizes[0];
        if (s <= mtuBytes) {
            return sizes;
        }
        if (sizeGiven) {
            throw new IllegalArgumentException("-s " + s + " -c UD: Max message size in UD cannot be greater than MTU ("
                    + mtuBytes + " B; perftest refuses it too); use -s " + mtuBytes + " or less, or a larger MTU (-m)");
        }
        err.printf(" Max msg size in UD is MTU %d%n Changing to this MTU%n", mtuBytes);
        return new int[] {mtuBytes};
    }

    /** Where this side's UD sends go: the peer's GID through {@code gidIndex}, or its LID when {@code gidIndex} is -1. */
    static AddressVector route(int port, int gidIndex, KeyMessage peer) {
        if (gidIndex < 0) {
            return AddressVector.lid(port, peer.lid());
        }
        if (peer.gid() == null) {
            throw new IllegalStateException("the peer sent no GID, but this side uses GID index " + gidIndex
                    + " (use -x on both sides, or on neither)");
        }
        return new AddressVector(port, 0, Gid.of(peer.gid()), gidIndex, HOP_LIMIT, 0, 0);
    }

    /** RESET→INIT→RTR→RTS with perftest's Q_Key and this side's PSN; returns the side's endpoint. */
    static QueuePairEndpoint activate(PerfSide side, int port, int gidIndex, int psn) {
        side.qp.activateUd(port, QKEY, psn);
        return side.qp.localEndpoint(gidIndex, psn);
    }

    /**
     * Points {@code side} at the peer: an address handle to it when this side sends (every
     * client, both sides of send_lat), the peer's QP number, and the receive layout (the GRH
     * before a cache-line-aligned payload).
     */
    static void connect(
            PerfSide side, ProtectionDomain pd, int port, int gidIndex, KeyMessage peer, boolean sends, int cacheLine) {
        side.udRecvShift = cacheLine - GRH;
        side.udRecvExtra = GRH;
        side.udRemoteQpn = peer.qpn();
        if (sends) {
            AddressHandle ah = pd.createAddressHandle(route(port, gidIndex, peer));
            side.udAh = ah;
        }
    }
}
