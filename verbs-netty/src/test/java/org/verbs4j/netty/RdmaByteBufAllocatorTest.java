package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ResourceLeakDetector;
import java.lang.foreign.Arena;
import java.util.EnumSet;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.Context;
import org.verbs4j.ForeignHandles;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.VerbsException;
import org.verbs4j.pool.BufferPool;

/**
 * Host tier: {@link RdmaByteBufAllocator}'s accounting over a pool on a borrowed (fake) protection
 * domain, whose registrar wraps memory under made-up keys (nothing native is called). A slot returns
 * to the pool only once its buffer was released and every send posted from it completed; a
 * buffer the pool cannot serve is an ordinary one; a capacity change takes a buffer out of its
 * slot; under Netty's PARANOID leak detection
 * its wrappers still post in place.
 */
class RdmaByteBufAllocatorTest {
    private final Arena arena = Arena.ofShared();
    private final Context context = ForeignHandles.context(arena.allocate(4096, 64), "fake0");
    private final ProtectionDomain pd = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
    private final ProtectionDomain otherPd = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
    private final BufferPool pool = BufferPool.builder(pd)
            .registrar((d, memory, access) -> ForeignHandles.memoryRegion(d, memory, 0x1001, 0x2001, access))
            .sizeClass(4096, 1)
            .unsafeSharedBuffers(true)
            .build();
    private final RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(pool);

    @AfterEach
    void close() {
        pool.close();
        otherPd.close();
        pd.close();
        context.close();
        arena.close();
    }

    private long leased() {
        return pool.outstandingLeases().size();
    }

    @Test
    void aDirectBufferIsAPoolSlotAndItsReleaseReturnsIt() {
        ByteBuf b = alloc.directBuffer(100);
        RegisteredByteBuf r = assertInstanceOf(RegisteredByteBuf.class, b.unwrap() == null ? b : b.unwrap());
        assertEquals(4096, b.capacity(), "the slot's size class");
        assertEquals(0, b.readableBytes());
        b.writeLong(0x0102030405060708L).writeByte(9);
        assertEquals(0x0102030405060708L, b.readLong());
        assertEquals(1, leased());
        assertSame(r, RegisteredByteBuf.inPlace(b, pd), "posted in place in the pool's protection domain");
        assertNull(RegisteredByteBuf.inPlace(b, otherPd), "copied on a connection of another protection domain");
        assertTrue(b.release());
        assertEquals(0, leased(), "the slot is back");
        assertEquals(0, alloc.fallbacks());
    }

    /** An allocator that owns {@code owned} (as {@link RdmaByteBufAllocator#forAddress} makes one). */
    private static RdmaByteBufAllocator owning(ProtectionDomain owned) {
        BufferPool ownPool = BufferPool.builder(owned)
                .registrar((d, memory, access) -> ForeignHandles.memoryRegion(d, memory, 0x1002, 0x2002, access))
                .sizeClass(4096, 1)
                .unsafeSharedBuffers(true)
                .build();
        return new RdmaByteBufAllocator(ownPool, owned);
    }

    @Test
    void aHoldOnItsProtectionDomainKeepsItOpenPastTheAllocatorsClose() {
        ProtectionDomain owned = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
        RdmaByteBufAllocator a = owning(owned);
        assertNull(RdmaByteBufAllocator.holdDomain(alloc, context), "an allocator over a caller's pool: no hold");
        assertNull(RdmaByteBufAllocator.holdDomain(io.netty.buffer.ByteBufAllocator.DEFAULT, context));
        Context other = ForeignHandles.context(arena.allocate(4096, 64), "fake1");
        try {
            assertNull(RdmaByteBufAllocator.holdDomain(a, other), "a domain of another device: no hold");
        } finally {
            other.close();
        }
        Runnable hold = RdmaByteBufAllocator.holdDomain(a, context);
        assertNotNull(hold);
        a.close();
        a.close(); // idempotent: the allocator's own hold is dropped once
        assertTrue(owned.isOpen(), "held by the loop's queue past the allocator's close");
        hold.run();
        assertFalse(owned.isOpen(), "closed with the last hold");
        hold.run(); // a hold is released once
        assertNull(RdmaByteBufAllocator.holdDomain(a, context), "nothing to hold any more");
    }

    @Test
    void withoutAHoldTheAllocatorClosesItsProtectionDomain() {
        ProtectionDomain owned = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
        RdmaByteBufAllocator a = owning(owned);
        Runnable hold = RdmaByteBufAllocator.holdDomain(a, context);
        hold.run();
        assertTrue(owned.isOpen(), "the allocator's own hold is left");
        a.close();
        assertFalse(owned.isOpen());
    }

    @Test
    void aClosedAllocatorGrantsNoNewHold() {
        ProtectionDomain owned = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
        RdmaByteBufAllocator a = owning(owned);
        Runnable first = RdmaByteBufAllocator.holdDomain(a, context);
        a.close();
        assertNull(RdmaByteBufAllocator.holdDomain(a, context), "closed: a new loop makes a domain of its own");
        first.run();
        assertFalse(owned.isOpen(), "closed with the hold taken before the allocator's close");
    }

    @Test
    void aDomainCloseRefusedWhileARegionIsOnItCanBeRetried() {
        ProtectionDomain owned = ForeignHandles.protectionDomain(context, arena.allocate(64, 64));
        RdmaByteBufAllocator a = owning(owned);
        MemoryRegion child = ForeignHandles.memoryRegion(
                owned, arena.allocate(4096, 4096), 0x1003, 0x2003, EnumSet.of(Access.LOCAL_WRITE));
        VerbsException e = assertThrows(VerbsException.class, a::close);
        assertTrue(e.getMessage().contains("EBUSY"), e.getMessage());
        assertTrue(owned.isOpen());
        Runnable hold = RdmaByteBufAllocator.holdDomain(a, context);
        assertNotNull(hold, "not closed: it still grants holds");
        hold.run();
        child.close();
        a.close(); // the retry closes the domain
        assertFalse(owned.isOpen(), "closed by the retry");
    }

    @Test
    void aBufferReleasedWhilePostedKeepsItsSlotUntilTheSendCompleted() {
        ByteBuf b = alloc.directBuffer(4096);
        RegisteredByteBuf r = RegisteredByteBuf.inPlace(b, pd);
        assertNotNull(r);
        assertTrue(r.pin(), "posted");
        assertTrue(r.pin(), "a second frame of it posted");
        assertTrue(b.release(), "the application let go at once");
        assertEquals(1, leased(), "still held by the sends in flight");
        ByteBuf next = alloc.directBuffer(4096);
        assertNull(RegisteredByteBuf.inPlace(next, pd), "the held slot is not handed out again: an ordinary buffer");
        assertEquals(1, alloc.fallbacks());
        next.release();
        r.unpin();
        assertEquals(1, leased(), "one send still in flight");
        r.unpin();
        assertEquals(0, leased(), "back once the last send completed");
        assertFalse(r.pin(), "a released buffer is never posted again");
        ByteBuf again = alloc.directBuffer(4096);
        assertNotNull(RegisteredByteBuf.inPlace(again, pd), "the slot serves the next buffer");
        again.release();
        assertEquals(0, leased());
    }

    @Test
    void aSendCompletingBeforeTheReleaseLeavesTheSlotToTheRelease() {
        ByteBuf b = alloc.directBuffer(10);
        RegisteredByteBuf r = RegisteredByteBuf.inPlace(b, pd);
        assertTrue(r.pin());
        r.unpin();
        assertEquals(1, leased(), "the application still holds it");
        b.release();
        assertEquals(0, leased());
        assertThrows(IllegalReferenceCountException.class, b::release, "Netty refuses a second release");
        assertEquals(0, leased(), "and the pool saw one release only");
    }

    @Test
    void requestsThePoolCannotServeGetOrdinaryBuffers() {
        ByteBuf big = alloc.directBuffer(4097);
        assertTrue(big.isDirect());
        assertNull(RegisteredByteBuf.inPlace(big, pd), "larger than the largest class: copied");
        ByteBuf heap = alloc.heapBuffer(10);
        assertTrue(heap.hasArray());
        assertNull(RegisteredByteBuf.inPlace(heap, pd));
        assertEquals(1, alloc.fallbacks());
        assertEquals(0, leased());
        big.release();
        heap.release();
        ByteBuf io = alloc.ioBuffer(64);
        assertNotNull(RegisteredByteBuf.inPlace(io, pd), "I/O buffers (the transport's reads) come from the pool");
        io.release();
        assertEquals(0, leased());
    }

    @Test
    void aCapacityChangeMovesTheBytesOutOfTheSlotWhichReturnsOnRelease() {
        ByteBuf b = alloc.directBuffer(16);
        b.writeInt(42);
        b.capacity(8192);
        assertEquals(42, b.getInt(0), "the bytes moved with it");
        assertNull(RegisteredByteBuf.inPlace(b, pd), "no longer in registered memory: copied");
        assertEquals(1, leased());
        b.release();
        assertEquals(0, leased());
    }

    @Test
    void aWholeDuplicateOrTheLeakTrackedWrapperPostsInPlaceAPartialSliceIsCopied() {
        ByteBuf b = alloc.directBuffer(100);
        RegisteredByteBuf r = RegisteredByteBuf.inPlace(b, pd);
        assertSame(r, RegisteredByteBuf.inPlace(b.duplicate(), pd));
        assertNull(RegisteredByteBuf.inPlace(b.slice(1, 10), pd), "a slice at an offset is copied");
        b.release();
    }

    @Test
    void underNettysParanoidLeakDetectionTheBuffersAreTrackedAndADroppedOneKeepsItsSlot() {
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        try {
            ByteBuf tracked = alloc.directBuffer(8);
            assertNotSame(RegisteredByteBuf.class, tracked.getClass(), "wrapped by the leak detector");
            assertNotNull(RegisteredByteBuf.inPlace(tracked, pd), "and still posted in place through the wrapper");
            assertTrue(tracked.release());
            assertEquals(0, leased(), "released through the wrapper: the slot is back");
            dropOne();
            assertEquals(1, leased(), "a dropped buffer keeps its slot: never handed out while a send may use it");
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
        pool.release(leakedToken);
    }

    @Test
    void aMissingPoolOrAddressIsRefusedWithTheFix() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new RdmaByteBufAllocator(null));
        assertTrue(e.getMessage().contains("give a BufferPool"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RdmaByteBufAllocator.forAddress(null));
        assertTrue(e.getMessage().contains("RdmaByteBufAllocator.forAddress"), e.getMessage());
    }

    private long leakedToken;

    private void dropOne() {
        ByteBuf b = alloc.directBuffer(8).writeInt(1);
        leakedToken = RegisteredByteBuf.inPlace(b, pd).token();
    }
}
