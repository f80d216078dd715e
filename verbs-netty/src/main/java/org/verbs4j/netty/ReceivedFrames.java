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
    /**
     * The immediate value's top bit: the sender's end of stream (its {@code shutdownOutput}); the
     * frame carries no bytes, and no data frame may follow it.
     */
    static final int END_OF_STREAM = 1 << 31;

    /**
     * The immediate value's second bit: a probe (see {@link RdmaStream}), and with the lowest bit
     * set too, {@link #PROBE_ACK} (the answer to one); no bytes, no credits, not a data frame. The
     * low 30 bits of any other frame are credits.
     */
    static final int PROBE = 1 << 30, PROBE_ACK = PROBE | 1;

    private final int[] slots, lengths;
    private int head, count, offset;
    private boolean endReceived;

    /** Room for {@code capacity} frames (one per receive buffer). */
    ReceivedFrames(int capacity) {
        slots = new int[capacity];
        lengths = new int[capacity];
    }

    /** Frames not handed up yet (the oldest perhaps in part). */
    int count() {
        return count;
    }

    /** The credits a frame's immediate value returns (without the end-of-stream and probe bits). */
    static int credits(int immediate) {
        return immediate & ~(END_OF_STREAM | PROBE);
    }

    /**
     * A frame arrived in receive buffer {@code slot} with {@code length} bytes and the immediate
     * value {@code immediate} (not a probe's): data frames are kept in order; an empty frame
     * (credits only) or the end of stream keeps nothing.
     *
     * @return whether the buffer may be reposted at once (the frame holds no stream bytes)
     * @throws ProtocolViolationException an end of stream with bytes, a second end of stream, or
     *     bytes after the end of stream
     */
    boolean arrived(int slot, int length, int immediate) throws ProtocolViolationException {
        if ((immediate & END_OF_STREAM) != 0) {
            if (length != 0) {
                throw new ProtocolViolationException("the peer's end-of-stream frame carries " + length
                        + " bytes (an end-of-stream frame carries none)");
            }
            if (endReceived) {
                throw new ProtocolViolationException("the peer sent a second end-of-stream frame");
            }
            endReceived = true;
            return true;
        }
        if (length == 0) {
            return true;
        }
        if (endReceived) {
            throw new ProtocolViolationException(
                    "the peer sent a frame of " + length + " bytes after its end of stream");
        }
        add(slot, length);
        return false;
    }

    /** Whether the peer's end of stream arrived and every byte before it was taken. */
    boolean ended() {
        return endReceived && count == 0;
    }

    /**
     * The length of the oldest frame if none of its bytes was taken yet (so that it can be handed
     * up whole, {@link #drop()} then forgets it); else -1 (no frame, or one partly taken).
     */
    int wholeHeadLength() {
        return count == 0 || offset != 0 ? -1 : lengths[head];
    }

    /**
     * Forgets the oldest frame without taking its bytes (the input was shut down, or the frame was handed up whole).
     *
     * @return its slot (its buffer may be reposted), or -1 if there is none
     */
    int drop() {
        if (count == 0) {
            return -1;
        }
        int slot = slots[head];
        offset = 0;
        head = (head + 1) % slots.length;
        count--;
        return slot;
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

    /** The slot of the oldest frame, or -1 if there is none. */
    int headSlot() {
        return count == 0 ? -1 : slots[head];
    }

    /**
     * Copies the next bytes of the oldest frame, as many as {@code dst} has room for, from
     * {@code buffers} (slot {@code s} at {@code (s % slotsPerView) × bufferSize}) into {@code dst}.
     *
     * @return the slot of the frame if this took its last byte (its buffer may be reposted), else -1
     */
    int take(ByteBuf buffers, int bufferSize, int slotsPerView, ByteBuf dst) {
        if (count == 0) {
            return -1;
        }
        int slot = slots[head];
        int n = Math.min(dst.writableBytes(), lengths[head] - offset);
        dst.writeBytes(buffers, slot % slotsPerView * bufferSize + offset, n);
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
