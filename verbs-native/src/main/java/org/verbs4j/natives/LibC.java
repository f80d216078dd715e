package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * The few libc calls the verbs need around their file descriptors: {@code poll(2)} with a
 * timeout, so that waiting for a completion event or an async event never hangs. Stateless;
 * any thread may call it.
 */
public final class LibC {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle POLL = LINKER.downcallHandle(
            LINKER.defaultLookup().findOrThrow("poll"), FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT),
            Errno.CAPTURE_OPTION);
    /** {@code POLLIN}. */
    public static final short POLLIN = 1;

    private LibC() {
    }

    /**
     * Waits until {@code fd} is readable or {@code timeoutMillis} passed (EINTR is retried with
     * the remaining time).
     *
     * @return true when readable, false on timeout
     * @throws RuntimeException (a {@link VerbsFailure}) naming {@code verb} when poll fails or the fd reports an error
     */
    public static boolean pollReadable(String verb, int fd, long timeoutMillis) {
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pfd = arena.allocate(8, 4);
            while (true) {
                long left = Math.max(0, (deadline - System.nanoTime()) / 1_000_000L);
                pfd.set(JAVA_INT, 0, fd);
                pfd.set(JAVA_SHORT, 4, POLLIN);
                pfd.set(JAVA_SHORT, 6, (short) 0);
                MemorySegment cap = Errno.captureSegment();
                int rc = (int) POLL.invokeExact(cap, pfd, 1L, (int) Math.min(left, Integer.MAX_VALUE));
                if (rc > 0) {
                    short revents = pfd.get(JAVA_SHORT, 6);
                    if ((revents & POLLIN) != 0) {
                        return true;
                    }
                    throw Failures.of(verb, Errno.EIO, "poll(2) on fd " + fd + " reported revents 0x"
                            + Integer.toHexString(revents));
                }
                if (rc == 0) {
                    if (System.nanoTime() - deadline >= 0) {
                        return false;
                    }
                    continue;
                }
                int e = Errno.captured(cap);
                if (e != Errno.EINTR) {
                    throw Failures.of(verb, e, "poll(2) on fd " + fd + " failed");
                }
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }
}
