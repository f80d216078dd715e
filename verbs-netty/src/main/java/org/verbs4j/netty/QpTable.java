package org.verbs4j.netty;

/**
 * Queue pair numbers to their streams ({@code T}) (open addressing, linear probing, deletion by backward
 * shift): the lookup of a shared receive queue's completion allocates nothing. Not thread-safe
 * (its owner, {@link SharedReceives}, locks).
 */
final class QpTable<T> {
    private int[] keys = new int[16];
    private Object[] values = new Object[16];
    private int size;

    /** The stream of queue pair {@code qpn}, or null. */
    @SuppressWarnings("unchecked")
    T get(int qpn) {
        int mask = keys.length - 1;
        for (int i = mix(qpn) & mask; values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == qpn) {
                return (T) values[i];
            }
        }
        return null;
    }

    void put(int qpn, T s) {
        if (2 * (size + 1) > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        int i = mix(qpn) & mask;
        for (; values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == qpn) {
                values[i] = s;
                return;
            }
        }
        keys[i] = qpn;
        values[i] = s;
        size++;
    }

    void remove(int qpn) {
        int mask = keys.length - 1;
        int i = mix(qpn) & mask;
        while (values[i] != null && keys[i] != qpn) {
            i = (i + 1) & mask;
        }
        if (values[i] == null) {
            return;
        }
        values[i] = null;
        size--;
        for (int j = (i + 1) & mask; values[j] != null; j = (j + 1) & mask) { // shift the run back over the hole
            int home = mix(keys[j]) & mask;
            if (((j - home) & mask) >= ((j - i) & mask)) {
                keys[i] = keys[j];
                values[i] = values[j];
                values[j] = null;
                i = j;
            }
        }
    }

    int size() {
        return size;
    }

    @SuppressWarnings("unchecked")
    private void grow() {
        int[] k = keys;
        Object[] v = values;
        keys = new int[k.length * 2];
        values = new Object[k.length * 2];
        size = 0;
        for (int i = 0; i < k.length; i++) {
            if (v[i] != null) {
                put(k[i], (T) v[i]);
            }
        }
    }

    private static int mix(int x) {
        x *= 0x9E3779B9;
        return x ^ (x >>> 16);
    }
}
