package org.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import java.io.IOException;

/**
 * The write side of a stream channel (pure logic over Netty's {@link ChannelOutboundBuffer}, no
 * device): flushed bytes are copied, in order, into send frames of {@link Frames} (a buffer the
 * frames post in place, registered memory, goes in frames of its own bytes, uncopied); they stay in
 * the outbound buffer while in flight (so that their promises complete only when the frames
 * carrying them completed) and leave it when {@link #completed} reports them done.
 *
 * <p>The outbound buffer's head holds exactly {@link #inFlight()} bytes posted and not completed,
 * then the bytes not sent yet; every method keeps that true at each point where Netty may call
 * back into the channel: completing a write's promise runs its listeners, and a writability change
 * runs the pipeline, either of which may write, flush (and so call {@link #write}) or close the
 * channel before the method returns.
 *
 * <p>Owned by the channel's event loop thread; not thread-safe. Allocates nothing.
 */
final class OutboundFrames {
    /** Where frames go: the connection's send buffers and credits. */
    interface Frames {
        /** The most stream bytes one frame carries. */
        int chunkSize();

        /** Whether a data frame may be posted now. */
        boolean canSendData();

        /**
         * The buffer the next frame is copied into, at {@link #sendOffset()}; asked for only when a
         * frame has bytes to copy. Null: none is free now (a loop's shared send buffers): the bytes
         * wait, and the frames have the channel flush again when one may be.
         */
        ByteBuf sendBuffer();

        /** Where in {@link #sendBuffer()} the next frame goes (after it returned a buffer). */
        int sendOffset();

        /** Posts the next frame with {@code length} stream bytes. */
        void post(int length) throws IOException;

        /** Whether {@code b}'s bytes can be posted from where they lie (registered memory), not copied. */
        default boolean postsInPlace(ByteBuf b) {
            return false;
        }

        /** Posts the next frame with {@code length} bytes of {@code b} from index {@code index}, in place. */
        default void postInPlace(ByteBuf b, int index, int length) throws IOException {
            throw new UnsupportedOperationException("postInPlace");
        }
    }

    private final Copier copier = new Copier();
    private long inFlight;
    private boolean drained = true;

    /** Bytes at the head of the outbound buffer that were posted and have not completed. */
    long inFlight() {
        return inFlight;
    }

    /**
     * Posts flushed bytes not yet in flight while {@code out} takes frames; completes the promises
     * of empty buffers at the head (nothing to send). The channel's {@code doWrite}.
     *
     * @throws IOException a frame could not be posted (the connection is down)
     */
    void write(ChannelOutboundBuffer in, Frames out) throws IOException {
        int chunk = out.chunkSize();
        for (; ; ) {
            removeEmptyHead(in);
            if (!out.canSendData()) {
                drained = false; // perhaps bytes remain: the next write finds out
                return;
            }
            copier.reset(inFlight, out, chunk);
            try {
                in.forEachFlushedMessage(copier);
            } catch (Exception e) {
                throw new IllegalStateException("copying a flushed buffer failed: " + e, e); // ByteBuf.getBytes only
            }
            int n = copier.filled;
            if (n == 0) {
                drained = !copier.starved; // else bytes wait for a send buffer
                return;
            }
            ByteBuf inPlace = copier.inPlace;
            if (inPlace != null) {
                copier.inPlace = null;
                out.postInPlace(inPlace, copier.inPlaceIndex, n);
            } else {
                out.post(n);
            }
            inFlight += n;
        }
    }

    /**
     * The frames carrying the next {@code bytes} in-flight bytes completed: those bytes leave the
     * outbound buffer, buffer by buffer, each buffer's promise succeeding once all its bytes did.
     */
    void completed(ChannelOutboundBuffer in, long bytes) {
        // not ChannelOutboundBuffer.removeBytes: it runs a removed buffer's listeners before it
        // advances the next buffer past its completed bytes, so a write in a listener would see
        // those bytes as unsent and post them again
        while (bytes > 0 && in.current() instanceof ByteBuf b) {
            int readable = b.readableBytes();
            if (readable <= bytes) {
                bytes -= readable;
                inFlight -= readable;
                in.progress(readable);
                in.remove(); // listeners run here: the head and inFlight agree
            } else {
                b.skipBytes((int) bytes);
                inFlight -= bytes;
                in.progress(bytes);
                bytes = 0;
            }
        }
        if (bytes > 0) {
            inFlight = 0; // the channel closed meanwhile: its outbound buffer failed what was in it
            return;
        }
        removeEmptyHead(in);
    }

    /** Removes empty buffers at the head: every byte before them completed, so their promises succeed. */
    private static void removeEmptyHead(ChannelOutboundBuffer in) {
        while (in.current() instanceof ByteBuf b && !b.isReadable()) {
            in.remove();
        }
    }

    /**
     * Whether the last {@link #write} posted every flushed byte (so that a frame posted now comes
     * after all of them); false while it may have left some for lack of credits or send buffers.
     */
    boolean allPosted() {
        return drained;
    }

    /** Forgets what was in flight (the connection is gone; the outbound buffer fails its writes). */
    void reset() {
        inFlight = 0;
        drained = true;
    }

    /**
     * Copies flushed bytes, after the first {@code skip} (already in flight), into a send buffer;
     * or, for a buffer the frames post in place, takes the next chunk of it alone ({@link
     * #inPlace}, from {@link #inPlaceIndex}) and copies nothing; or copies nothing and sets {@link
     * #starved} when the frames have no send buffer now. One instance, reused.
     */
    private static final class Copier implements ChannelOutboundBuffer.MessageProcessor {
        long skip;
        Frames frames;
        ByteBuf dst, inPlace;
        int offset, room, filled, inPlaceIndex;
        boolean starved;

        void reset(long skip, Frames frames, int room) {
            this.skip = skip;
            this.frames = frames;
            this.dst = null; // taken at the first byte to copy
            this.room = room;
            this.filled = 0;
            this.inPlace = null;
            this.starved = false;
        }

        @Override
        public boolean processMessage(Object msg) {
            ByteBuf b = (ByteBuf) msg;
            int readable = b.readableBytes();
            if (skip >= readable) {
                skip -= readable;
                return true;
            }
            int from = b.readerIndex() + (int) skip;
            if (frames.postsInPlace(b)) {
                if (filled == 0) { // else the bytes copied so far go first, in a frame of their own
                    inPlace = b;
                    inPlaceIndex = from;
                    filled = Math.min(readable - (int) skip, room);
                }
                return false;
            }
            if (dst == null) {
                if ((dst = frames.sendBuffer()) == null) {
                    starved = true;
                    return false;
                }
                offset = frames.sendOffset();
            }
            int n = Math.min(readable - (int) skip, room - filled);
            b.getBytes(from, dst, offset + filled, n);
            skip = 0;
            filled += n;
            return filled < room;
        }
    }
}
