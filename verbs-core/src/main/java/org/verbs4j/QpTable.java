package org.verbs4j;

import java.util.ArrayList;
import java.util.List;

/**
 * An immutable open-addressing map from QP number to the {@link QueueAccount} of a queue pair, replaced as a whole when
 * a queue pair is attached to or detached from a completion queue (control path), read without
 * locks or allocation by the poller (data path). Thread-safe by immutability.
 */
final class QpTable {
    static final QpTable EMPTY = new QpTable(new QueueAccount[0]);

    private final QueueAccount[] all;
    private final int[] keys;
    private final QueueAccount[] values;
    private final int mask;

    private QpTable(QueueAccount[] all) {
        this.all = all;
        int size = Integer.highestOneBit(Math.max(2, all.length * 4) - 1) << 1;
        this.keys = new int[size];
        this.values = new QueueAccount[size];
        this.mask = size - 1;
        for (QueueAccount q : all) {
            int h = mix(q.qpNumber) & mask;
            while (values[h] != null) {
                h = (h + 1) & mask;
            }
            keys[h] = q.qpNumber;
            values[h] = q;
        }
    }

    private static int mix(int k) {
        return (k * 0x9E3779B9) >>> 7;
    }

    /** The queue pair with QP number {@code qpn}, or null. */
    QueueAccount get(int qpn) {
        int h = mix(qpn) & mask;
        QueueAccount v;
        while ((v = values[h]) != null) {
            if (keys[h] == qpn) {
                return v;
            }
            h = (h + 1) & mask;
        }
        return null;
    }

    QpTable with(QueueAccount q) {
        List<QueueAccount> l = new ArrayList<>(List.of(all));
        l.add(q);
        return new QpTable(l.toArray(new QueueAccount[0]));
    }

    QpTable without(QueueAccount q) {
        List<QueueAccount> l = new ArrayList<>(List.of(all));
        l.remove(q);
        return l.isEmpty() ? EMPTY : new QpTable(l.toArray(new QueueAccount[0]));
    }

    QueueAccount[] all() {
        return all;
    }
}
