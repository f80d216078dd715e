package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The read side's byte order on the host: frames arrive in receive buffers taken in any order,
 * readers take them with buffers of any size (one byte, less than a frame, several frames) or
 * whole frames in place (zero-copy reads, between copies), and
 * the bytes handed up are the bytes sent, in order, each buffer freed once and only when its
 * frame is all taken.
 */
class ReceivedFramesTest {
    @Property(tries = 300)
    void readsHandUpTheBytesInArrivalOrder(
            @ForAll long seed,
            @ForAll @IntRange(min = 1, max = 100) int bufferSize,
            @ForAll @IntRange(min = 1, max = 8) int buffers) {
        Random random = new Random(seed);
        ByteBuf memory = Unpooled.buffer(bufferSize * buffers);
        ReceivedFrames frames = new ReceivedFrames(buffers);
        List<Integer> free = new ArrayList<>();
        for (int i = 0; i < buffers; i++) {
            free.add(i);
        }
        ArrayDeque<Integer> inUse = new ArrayDeque<>(); // arrival order
        ByteArrayOutputStream sent = new ByteArrayOutputStream();
        ByteArrayOutputStream read = new ByteArrayOutputStream();
        for (int step = 0; step < 500; step++) {
            if (!free.isEmpty() && random.nextBoolean()) {
                Collections.shuffle(free, random); // the device fills whichever buffer it took next
                int slot = free.remove(free.size() - 1);
                byte[] frame = new byte[1 + random.nextInt(bufferSize)];
                random.nextBytes(frame);
                memory.setBytes(slot * bufferSize, frame);
                sent.writeBytes(frame);
                frames.add(slot, frame.length);
                inUse.addLast(slot);
            } else if (frames.count() > 0 && frames.wholeHeadLength() >= 0 && random.nextInt(4) == 0) {
                int length = frames.wholeHeadLength(); // handed up in place: the whole frame, uncopied
                int slot = frames.drop();
                assertEquals(inUse.removeFirst(), slot, "the frame handed up is the oldest");
                read.writeBytes(ByteBufUtil.getBytes(memory, slot * bufferSize, length));
                free.add(slot);
            } else if (frames.count() > 0) {
                int room = random.nextInt(3) == 0 ? 1 : 1 + random.nextInt(3 * bufferSize);
                ByteBuf dst = Unpooled.buffer(room, room);
                while (dst.isWritable() && frames.count() > 0) {
                    int done = frames.take(memory, bufferSize, Integer.MAX_VALUE, dst);
                    if (done >= 0) {
                        assertEquals(inUse.removeFirst(), done, "the buffer freed is the oldest frame's");
                        free.add(done);
                    }
                }
                read.write(dst.array(), 0, dst.readableBytes());
            }
        }
        ByteBuf rest = Unpooled.buffer(bufferSize * buffers);
        while (frames.count() > 0) {
            int done = frames.take(memory, bufferSize, Integer.MAX_VALUE, rest);
            if (done >= 0) {
                assertEquals(inUse.removeFirst(), done);
            }
        }
        read.write(rest.array(), 0, rest.readableBytes());
        assertArrayEquals(sent.toByteArray(), read.toByteArray(), "the bytes handed up");
        assertEquals(0, inUse.size(), "every buffer freed");
    }

    @Test
    void theFlagBitsAreNoCredits() {
        assertEquals(0, ReceivedFrames.credits(ReceivedFrames.PROBE), "a probe returns no credit");
        assertEquals(1, ReceivedFrames.PROBE_ACK & ~ReceivedFrames.PROBE, "an answer is a probe with the low bit");
        assertEquals(
                (1 << 30) - 1, ReceivedFrames.credits(-1), "the low 30 bits are the credits, the two flags are not");
    }

    @Test
    void theEndOfStreamComesAfterEveryByteBeforeIt() throws ProtocolViolationException {
        ByteBuf memory = Unpooled.buffer(4 * 8);
        memory.setBytes(8, new byte[] {1, 2, 3});
        ReceivedFrames frames = new ReceivedFrames(4);
        assertFalse(frames.arrived(1, 3, 5), "a data frame is kept");
        assertTrue(frames.arrived(2, 0, ReceivedFrames.END_OF_STREAM | 7), "the end of stream keeps no buffer");
        assertEquals(7, ReceivedFrames.credits(ReceivedFrames.END_OF_STREAM | 7), "its credits");
        assertFalse(frames.ended(), "bytes before the end are still to be taken");
        ByteBuf dst = Unpooled.buffer(8);
        assertEquals(1, frames.take(memory, 8, Integer.MAX_VALUE, dst));
        assertTrue(frames.ended(), "the input ends once they are taken");
        assertTrue(frames.arrived(3, 0, 9), "credit frames may still follow");
        assertArrayEquals(new byte[] {1, 2, 3}, ByteBufUtil.getBytes(dst));
    }

    @Test
    void aFrameAfterTheEndOfStreamIsAProtocolViolation() throws ProtocolViolationException {
        ReceivedFrames frames = new ReceivedFrames(4);
        frames.arrived(0, 0, ReceivedFrames.END_OF_STREAM);
        ProtocolViolationException data = assertThrows(ProtocolViolationException.class, () -> frames.arrived(1, 2, 0));
        assertTrue(data.getMessage().contains("2 bytes after its end of stream"), data.getMessage());
        ProtocolViolationException twice = assertThrows(
                ProtocolViolationException.class, () -> frames.arrived(1, 0, ReceivedFrames.END_OF_STREAM));
        assertTrue(twice.getMessage().contains("second end-of-stream"), twice.getMessage());
        assertEquals(0, frames.count(), "nothing after the end is kept");
    }

    @Test
    void anEndOfStreamCarryingBytesIsAProtocolViolation() {
        ReceivedFrames frames = new ReceivedFrames(4);
        ProtocolViolationException e = assertThrows(
                ProtocolViolationException.class, () -> frames.arrived(0, 5, ReceivedFrames.END_OF_STREAM));
        assertTrue(e.getMessage().contains("end-of-stream frame carries 5 bytes"), e.getMessage());
        assertFalse(frames.ended(), "a refused end of stream ends nothing");
    }

    @Test
    void droppedFramesFreeTheirBuffersInOrder() throws ProtocolViolationException {
        ReceivedFrames frames = new ReceivedFrames(4);
        frames.arrived(2, 4, 0);
        frames.arrived(0, 1, 0);
        ByteBuf memory = Unpooled.buffer(4 * 8);
        assertEquals(4, frames.wholeHeadLength(), "the oldest frame, whole");
        frames.take(memory, 8, Integer.MAX_VALUE, Unpooled.buffer(2)); // the oldest in part
        assertEquals(-1, frames.wholeHeadLength(), "partly taken: not whole any more");
        assertEquals(2, frames.drop());
        assertEquals(1, frames.wholeHeadLength());
        assertEquals(0, frames.drop());
        assertEquals(-1, frames.drop());
        assertEquals(0, frames.count());
    }
}
