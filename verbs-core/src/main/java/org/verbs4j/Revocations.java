package org.verbs4j;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A global count of revocations: it grows each time a memory region or an address handle is
 * closed, BEFORE the native object is destroyed. A work-request chain remembers the count at which
 * it last checked that every region and address handle it names is open; a post re-checks them
 * only when the count moved since. So a post that names only live objects costs one volatile read
 * here, in every mode, and a post that names a closed one is refused, never handed to the provider.
 * Thread-safe.
 */
final class Revocations {
    private static final AtomicLong EPOCH = new AtomicLong(1);

    private Revocations() {}

    /** The current count (a volatile read). */
    static long epoch() {
        return EPOCH.get();
    }

    /** Announces a revocation; call before destroying the object. */
    static void revoke() {
        EPOCH.incrementAndGet();
    }
}
