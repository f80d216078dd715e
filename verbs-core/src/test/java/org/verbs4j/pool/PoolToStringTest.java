package org.verbs4j.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Host tier: a pool's {@code toString} says what a user configured (name, size classes, regions), and when it is closed. */
class PoolToStringTest {

    @Test
    void namesTheConfigurationAndNoAddress() {
        try (FakeVerbs fake = new FakeVerbs()) {
            BufferPool pool =
                    fake.pool().name("rx").sizeClass(1024, 2).sizeClass(8192, 1).build();
            String open = pool.toString();
            assertTrue(open.startsWith("BufferPool 'rx' [1024, 8192] x 3 buffers, 2 region(s), "), open);
            assertFalse(
                    Pattern.compile("0x[0-9a-f]{9,}|@[0-9a-f]{6,}")
                            .matcher(open)
                            .find(),
                    "an address in: " + open);
            pool.close();
            assertEquals(open + " (closed)", pool.toString());
        }
    }
}
