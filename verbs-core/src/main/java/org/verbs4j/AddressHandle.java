package org.verbs4j;

import java.lang.foreign.MemorySegment;
import org.verbs4j.natives.LibIbverbs;

/**
 * An address handle ({@code struct ibv_ah}): the destination of UD sends. Owned by its
 * protection domain. Immutable after creation; any thread may name it in work requests. The
 * provider reads it when a request naming it is posted, so a chain that names it is refused once
 * it is closed (in every mode), and {@link #close()} waits until no post of its protection domain
 * is inside the provider before destroying it.
 */
public final class AddressHandle extends NativeResource {
    private final AddressVector vector;
    final long address;

    AddressHandle(ProtectionDomain pd, MemorySegment ah, AddressVector vector) {
        this(pd, ah, vector, LibIbverbs::destroyAh);
    }

    AddressHandle(ProtectionDomain pd, MemorySegment ah, AddressVector vector, Destroyer destroy) {
        super(pd, "address handle", "ibv_destroy_ah", ah, destroy, null);
        this.vector = vector;
        this.address = ah.address();
    }

    @Override
    void beforeRelease() {
        Revocations.revoke();
        ((ProtectionDomain) owner).quiesce();
    }

    /** Where it points. */
    public AddressVector vector() {
        return vector;
    }

    @Override
    String describe() {
        return "AddressHandle on " + device() + " to "
                + (vector.isGlobal() ? "GID " + vector.dgid() : "LID " + vector.dlid()) + " via port " + vector.port();
    }
}
