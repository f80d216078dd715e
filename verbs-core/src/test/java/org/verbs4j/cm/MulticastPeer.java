package org.verbs4j.cm;

import java.net.InetAddress;
import java.time.Duration;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.testing.PeerJvm;

/**
 * The receiver in a second JVM of {@link MulticastGuestTest}: arguments IP, group, count, sender
 * QPN. Joins the group with a UD queue pair ({@code n} receives posted), prints {@code JOINED},
 * checks every datagram ({@link MulticastMember#expectAll}), prints {@code RECEIVED n}, leaves
 * and closes everything.
 */
final class MulticastPeer {
    private MulticastPeer() {}

    public static void main(String[] args) {
        PeerJvm.exitAfter(() -> {
            InetAddress ip = InetAddress.getByName(args[0]);
            InetAddress group = InetAddress.getByName(args[1]);
            int n = Integer.parseInt(args[2]);
            int senderQpn = Integer.parseInt(args[3]);
            try (CmEventChannel ch = CmEventChannel.open()) {
                Context ctx = ch.deviceContext(ip);
                try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                        MulticastMember r = new MulticastMember(pd, n, true);
                        MulticastGroup g = MulticastGroup.join(ch, ip, group, r.qp, Duration.ofSeconds(60))) {
                    System.out.println("JOINED " + g.mgid());
                    r.expectAll(senderQpn, Duration.ofSeconds(120));
                    System.out.println("RECEIVED " + n);
                    g.leave();
                }
            }
        });
    }
}
