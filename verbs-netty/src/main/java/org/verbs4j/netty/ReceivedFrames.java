package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;

/**
 * The data frames received and not yet handed up, in arrival order (pure logic, no device): each
 * is a receive buffer's slot and the frame's length; the oldest may be partly taken. Bytes leave
 * in exactly the order they arrived, in pieces as large as the reader's buffers, so a frame
 * larger than a read buffer spans several reads and a read buffer may hold several frames.
 *
 * <p>Owned by the channel's event loop thread; not thread-safe. Allocates nothing after construction.
 */
final class ReceivedFrames {
    private final int[] slots, lengths;
    private int head, count, offset;

    /** Room for {@code capacity} frames (one per receive buffer). */
    ReceivedFrames(int capacity) {
        slots = new int[capacity];
        lengths = new int[capacity];
    }

    /** Frames not handed up yet (the oldest perhaps in part). */
    int count() {
        return count;
    }

    /** The frame in receive buffer {@code slot} arrived with {@code length} bytes. */
    void add(int slot, int length) {
        if (count == slots.length) {
            throw new IllegalStateException("more frames than receive buffers (" + slots.length + ")");
        }
        int at = (head + count) % slots.length;
        slots[at] = slot;
        lengths[at] = length;
        count++;
    }

    /**
     * Copies the next bytes of the oldest frame, as many as {@code dst} has room for, from
     * {@code buffers} (slot {@code s} at {@code s × bufferSize}) into {@code dst}.
     *
     * @return the slot of the frame if this took its last byte (its buffer may be reposted), else -1
     */
    int take(ByteBuf buffers, int bufferSize, ByteBuf dst) {
        if (count == 0) {
            return -1;
        }
        int slot = slots[head];
        int n = Math.min(dst.writableBytes(), lengths[head] - offset);
        dst.writeBytes(buffers, slot * bufferSize + offset, n);
        offset += n;
        if (offset < lengths[head]) {
            return -1;
        }
        offset = 0;
        head = (head + 1) % slots.length;
        count--;
        return slot;
    }
}
