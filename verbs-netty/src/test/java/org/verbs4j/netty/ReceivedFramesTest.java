package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.netty.buffer.ByteBuf;
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

/**
 * The read side's byte order on the host: frames arrive in receive buffers taken in any order,
 * readers take them with buffers of any size (one byte, less than a frame, several frames), and
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
            } else if (frames.count() > 0) {
                int room = random.nextInt(3) == 0 ? 1 : 1 + random.nextInt(3 * bufferSize);
                ByteBuf dst = Unpooled.buffer(room, room);
                while (dst.isWritable() && frames.count() > 0) {
                    int done = frames.take(memory, bufferSize, dst);
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
            int done = frames.take(memory, bufferSize, rest);
            if (done >= 0) {
                assertEquals(inUse.removeFirst(), done);
            }
        }
        read.write(rest.array(), 0, rest.readableBytes());
        assertArrayEquals(sent.toByteArray(), read.toByteArray(), "the bytes handed up");
        assertEquals(0, inUse.size(), "every buffer freed");
    }
}
