package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.embedded.EmbeddedChannel;
import java.io.ByteArrayOutputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * The write side's byte order on the host, through Netty's own outbound buffer and pipeline: what
 * goes out in frames is exactly what was written, in write order, however the writes come (many
 * small ones, empty ones, ones larger than a frame) and whatever Netty runs while frames complete:
 * a write promise's listener that writes and flushes, and a handler that writes and flushes when
 * the channel turns writable again (as HTTP/2's flow controller does). Some writes are of buffers
 * the frames post in place (registered memory), each in frames of its own bytes alone.
 */
class OutboundFramesTest {
    @Property(tries = 200)
    void framesCarryTheWrittenBytesInWriteOrder(
            @ForAll long seed,
            @ForAll @IntRange(min = 1, max = 300) int chunk,
            @ForAll @IntRange(min = 1, max = 8) int slots,
            @ForAll @IntRange(min = 1, max = 9) int buffers) {
        new Run(seed, chunk, slots, buffers).run();
    }

    /**
     * Copy buffers all held by frames in flight (a loop's exhausted shared send buffers): the
     * write waits without a frame or a retry, the channel turns unwritable at its high water mark,
     * and as sends complete every byte goes, in order, and the channel turns writable again.
     */
    @org.junit.jupiter.api.Test
    void writesWaitForASendBufferAndResumeWhenOneComesBack() {
        FakeFrames frames = new FakeFrames(100, 8, 2);
        TestChannel ch = new TestChannel(frames);
        ch.config().setWriteBufferWaterMark(new WriteBufferWaterMark(150, 300));
        byte[] bytes = new byte[1000];
        new Random(1).nextBytes(bytes);
        ChannelFuture f = ch.writeAndFlush(Unpooled.wrappedBuffer(bytes));
        assertEquals(2, frames.pending(), "two frames, one per send buffer");
        assertEquals(0, frames.buffers, "every send buffer held");
        assertEquals(1, frames.starved, "one refused ask, no retry");
        ch.flush();
        assertEquals(2, frames.pending(), "a flush without a free buffer posts nothing");
        assertTrue(!ch.isWritable(), "unwritable past the high water mark while the bytes wait");
        while (frames.pending() > 0) {
            ch.complete(1);
        }
        assertTrue(f.isSuccess(), "the write completed");
        assertTrue(ch.isWritable(), "writable again");
        assertEquals(2, frames.buffers, "every send buffer given back");
        assertArrayEquals(bytes, frames.wire.toByteArray(), "every byte, in order");
    }

    /** One random conversation: writes from the test, from promise listeners and from writability changes. */
    private static final class Run {
        final Random random;
        final ByteArrayOutputStream expected = new ByteArrayOutputStream();
        final List<ChannelFuture> promises = new ArrayList<>();
        final FakeFrames frames;
        final TestChannel ch;
        int budget = 300; // messages still to write
        long directBytes; // written in direct buffers, which the fake frames post in place

        Run(long seed, int chunk, int slots, int buffers) {
            random = new Random(seed);
            frames = new FakeFrames(chunk, slots, buffers);
            ch = new TestChannel(frames);
            ch.config().setWriteBufferWaterMark(new WriteBufferWaterMark(64, 256));
            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelWritabilityChanged(ChannelHandlerContext ctx) {
                    if (ctx.channel().isWritable() && budget > 0) {
                        write(); // HTTP/2 writes pending stream data here, then flushes
                    }
                }
            });
        }

        ByteBuf message(int size) {
            byte[] b = new byte[size];
            random.nextBytes(b);
            expected.writeBytes(b);
            if (random.nextInt(3) == 0) {
                directBytes += size;
                return Unpooled.directBuffer(size).writeBytes(b);
            }
            return Unpooled.wrappedBuffer(b);
        }

        void write() {
            budget--;
            int size = switch (random.nextInt(4)) {
                case 0 -> 0;
                case 1 -> random.nextInt(8);
                case 2 -> random.nextInt(200);
                default -> random.nextInt(1000);
            };
            ChannelFuture f = ch.writeAndFlush(message(size));
            promises.add(f);
            if (budget > 0 && random.nextInt(3) == 0) {
                f.addListener(x -> write()); // a listener that writes on: runs as the bytes complete
            }
        }

        void run() {
            while (budget > 0 || frames.pending() > 0) {
                if (budget > 0 && random.nextBoolean()) {
                    write();
                } else if (frames.pending() > 0) {
                    ch.complete(1 + random.nextInt(frames.pending()));
                }
            }
            ch.runPendingTasks();
            assertEquals(0, frames.pending(), "every frame completed");
            assertEquals(frames.maxBuffers, frames.buffers, "every send buffer given back");
            assertArrayEquals(expected.toByteArray(), frames.wire.toByteArray(), "the bytes on the wire");
            assertEquals(
                    directBytes, frames.inPlaceBytes, "the direct buffers' bytes were posted in place, not copied");
            for (ChannelFuture f : promises) {
                assertTrue(f.isSuccess(), "every write's promise succeeded: " + f);
            }
            assertEquals(0, ch.outbound.inFlight());
            assertTrue(ch.unsafe().outboundBuffer().isEmpty(), "nothing left in the outbound buffer");
        }
    }

    /** A channel whose doWrite is the transport's write side, and whose sends complete when the test says. */
    private static final class TestChannel extends EmbeddedChannel {
        final OutboundFrames outbound = new OutboundFrames();
        final FakeFrames frames;

        TestChannel(FakeFrames frames) {
            this.frames = frames;
        }

        @Override
        protected void doWrite(ChannelOutboundBuffer in) throws Exception {
            outbound.write(in, frames);
        }

        /** The oldest {@code n} frames completed: what the channel does on their completions. */
        void complete(int n) {
            long bytes = frames.complete(n);
            ChannelOutboundBuffer in = unsafe().outboundBuffer();
            if (in != null) {
                outbound.completed(in, bytes);
            }
            flush(); // resumes sending what waited for a frame
        }
    }

    /**
     * Send frames of {@code chunk} bytes, {@code slots} in flight at most, copied frames each
     * holding one of {@code buffers} send buffers until they complete (as the loop's shared ones
     * are held); what is posted lands on {@link #wire}.
     */
    private static final class FakeFrames implements OutboundFrames.Frames {
        final ByteBuf buffer;
        final int chunk, slots, maxBuffers;
        final ArrayDeque<Integer> posted = new ArrayDeque<>();
        final ArrayDeque<Boolean> copied = new ArrayDeque<>();
        final ByteArrayOutputStream wire = new ByteArrayOutputStream();
        long head, inPlaceBytes;
        int buffers, starved;
        boolean staged;

        FakeFrames(int chunk, int slots, int buffers) {
            this.chunk = chunk;
            this.slots = slots;
            this.maxBuffers = buffers;
            this.buffers = buffers;
            this.buffer = Unpooled.buffer(chunk * slots);
        }

        int pending() {
            return posted.size();
        }

        long complete(int n) {
            long bytes = 0;
            for (int i = 0; i < n; i++) {
                bytes += posted.removeFirst();
                buffers += copied.removeFirst() ? 1 : 0;
            }
            return bytes;
        }

        @Override
        public int chunkSize() {
            return chunk;
        }

        @Override
        public boolean canSendData() {
            return posted.size() < slots;
        }

        @Override
        public ByteBuf sendBuffer() {
            if (!staged) {
                if (buffers == 0) {
                    starved++;
                    return null;
                }
                buffers--;
                staged = true;
            }
            return buffer;
        }

        @Override
        public int sendOffset() {
            return (int) (head % slots) * chunk;
        }

        @Override
        public void post(int length) {
            byte[] b = new byte[length];
            assertTrue(staged, "a copied frame took a send buffer");
            staged = false;
            buffer.getBytes(sendOffset(), b);
            wire.writeBytes(b);
            posted.addLast(length);
            copied.addLast(true);
            head++;
        }

        /** Direct buffers stand for registered ones. */
        @Override
        public boolean postsInPlace(ByteBuf b) {
            return b.isDirect();
        }

        @Override
        public void postInPlace(ByteBuf b, int index, int length) {
            assertTrue(
                    length > 0 && length <= chunk && index + length <= b.writerIndex(),
                    "within one frame and the buffer");
            byte[] bytes = new byte[length];
            b.getBytes(index, bytes);
            wire.writeBytes(bytes);
            inPlaceBytes += length;
            posted.addLast(length);
            copied.addLast(false);
            head++;
        }
    }
}
