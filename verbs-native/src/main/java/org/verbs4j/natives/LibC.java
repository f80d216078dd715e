package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The few libc calls the verbs need around their file descriptors: {@code poll(2)} with a
 * timeout, so that waiting for a completion event or an async event never hangs;
 * {@code fcntl(2)} to make the verbs' event fds non-blocking, so that a get-event call after
 * a poll that another thread won returns EAGAIN instead of blocking until the next event; and
 * an {@code eventfd(2)} that wakes a poll when its owner closes. Every call captures errno at
 * the call. Stateless; any thread may call it.
 */
public final class LibC {
    private static final SymbolLookup LIBC = Linker.nativeLinker().defaultLookup();
    private static final MethodHandle POLL =
            NativeBinding.symbol(LIBC, "poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle FCNTL =
            NativeBinding.variadic(LIBC, "fcntl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), 2);
    private static final MethodHandle EVENTFD =
            NativeBinding.symbol(LIBC, "eventfd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle WRITE =
            NativeBinding.symbol(LIBC, "write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle READ =
            NativeBinding.symbol(LIBC, "read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle CLOSE =
            NativeBinding.symbol(LIBC, "close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle SYSCONF =
            NativeBinding.symbol(LIBC, "sysconf", FunctionDescriptor.of(JAVA_LONG, JAVA_INT));
    private static final MethodHandle EPOLL_CREATE1 =
            NativeBinding.symbol(LIBC, "epoll_create1", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle EPOLL_CTL = NativeBinding.symbol(
            LIBC, "epoll_ctl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle EPOLL_WAIT = NativeBinding.symbol(
            LIBC, "epoll_wait", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
    /** {@code _SC_PAGESIZE} (Linux). */
    static final int _SC_PAGESIZE = 30;
    /** The size of a memory page of this machine, from {@code sysconf(_SC_PAGESIZE)}, read once. */
    public static final long PAGE_SIZE = pageSize();
    /** {@code POLLIN}. */
    public static final short POLLIN = 1;
    /** {@code POLLERR}, {@code POLLHUP}, {@code POLLNVAL}. */
    public static final short POLLERR = 8, POLLHUP = 16, POLLNVAL = 32;
    /** {@code O_NONBLOCK} (Linux x86_64 and aarch64; also {@code EFD_NONBLOCK}). */
    public static final int O_NONBLOCK = 0x800;
    /** {@code EFD_CLOEXEC} (= {@code O_CLOEXEC}). */
    public static final int EFD_CLOEXEC = 0x80000;

    private static final int F_GETFL = 3, F_SETFL = 4;

    /** {@code EPOLLIN}, {@code EPOLLONESHOT}. */
    public static final int EPOLLIN = 1, EPOLLONESHOT = 1 << 30;
    /** {@code EPOLL_CTL_ADD}, {@code EPOLL_CTL_DEL}, {@code EPOLL_CTL_MOD}. */
    public static final int EPOLL_CTL_ADD = 1, EPOLL_CTL_DEL = 2, EPOLL_CTL_MOD = 3;
    /** {@code EPOLL_CLOEXEC}. */
    public static final int EPOLL_CLOEXEC = 0x80000;
    /** {@code sizeof(struct epoll_event)}: packed on x86_64 (12 bytes), naturally aligned elsewhere (16). */
    public static final long EPOLL_EVENT_SIZE = isX86() ? 12 : 16;
    /** The offset of {@code epoll_event.data} (its {@code u64}). */
    public static final long EPOLL_DATA_OFFSET = isX86() ? 4 : 8;

    private LibC() {}

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
                    throw Failures.of(
                            verb,
                            Errno.EIO,
                            "poll(2) on fd " + fd + " reported revents 0x" + Integer.toHexString(revents));
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

    /**
     * Sets {@code O_NONBLOCK} on {@code fd} ({@code fcntl(F_GETFL)}, then {@code F_SETFL}), so
     * that a read with nothing to read fails with EAGAIN instead of blocking.
     *
     * @throws RuntimeException (a {@link VerbsFailure}) naming {@code verb} when fcntl fails (e.g. EBADF)
     */
    public static void setNonBlocking(String verb, int fd) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int flags = (int) FCNTL.invokeExact(cap, fd, F_GETFL, 0);
            if (flags < 0) {
                throw Failures.of(verb, Errno.captured(cap), "fcntl(" + fd + ", F_GETFL) failed");
            }
            if ((flags & O_NONBLOCK) != 0) {
                return;
            }
            cap = Errno.captureSegment();
            int rc = (int) FCNTL.invokeExact(cap, fd, F_SETFL, flags | O_NONBLOCK);
            if (rc < 0) {
                throw Failures.of(verb, Errno.captured(cap), "fcntl(" + fd + ", F_SETFL, O_NONBLOCK) failed");
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** Whether {@code fd} has {@code O_NONBLOCK} set ({@code fcntl(F_GETFL)}). */
    public static boolean isNonBlocking(int fd) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int flags = (int) FCNTL.invokeExact(cap, fd, F_GETFL, 0);
            if (flags < 0) {
                throw Failures.of("fcntl", Errno.captured(cap), "fcntl(" + fd + ", F_GETFL) failed");
            }
            return (flags & O_NONBLOCK) != 0;
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code eventfd(0, flags)}: a new event fd (e.g. {@code O_NONBLOCK | EFD_CLOEXEC}). */
    public static int eventFd(String verb, int flags) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int fd = (int) EVENTFD.invokeExact(cap, 0, flags);
            if (fd < 0) {
                throw Failures.of(verb, Errno.captured(cap), "eventfd(2) failed");
            }
            return fd;
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * Adds 1 to an event fd's counter ({@code write(2)} of an 8-byte 1), making it readable
     * until someone reads it. EAGAIN (the counter is saturated: already readable) is success.
     */
    public static void signalEventFd(String verb, int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment one = arena.allocate(JAVA_LONG);
            one.set(JAVA_LONG, 0, 1L);
            eventFdTransfer(WRITE, verb, fd, one, "write(2) to");
        }
    }

    /**
     * Resets a non-blocking event fd's counter ({@code read(2)} of its 8 bytes into {@code scratch},
     * 8 bytes of the caller's): nothing to read (EAGAIN) is success.
     */
    public static void drainEventFd(String verb, int fd, MemorySegment scratch) {
        eventFdTransfer(READ, verb, fd, scratch, "read(2) of");
    }

    /** One 8-byte {@code read(2)} or {@code write(2)} ({@code io}) of an event fd; EINTR retried, EAGAIN is success. */
    private static void eventFdTransfer(MethodHandle io, String verb, int fd, MemorySegment buf, String what) {
        try {
            while (true) {
                MemorySegment cap = Errno.captureSegment();
                long n = (long) io.invokeExact(cap, fd, buf, 8L);
                if (n == 8) {
                    return;
                }
                int e = Errno.captured(cap);
                if (e == Errno.EAGAIN) {
                    return;
                }
                if (e != Errno.EINTR) {
                    throw Failures.of(verb, e, what + " event fd " + fd + " failed");
                }
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** {@code close(2)}; returns 0 or the errno (EINTR is not retried: the fd is gone either way on Linux). */
    public static int close(int fd) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int rc = (int) CLOSE.invokeExact(cap, fd);
            return rc == 0 ? 0 : Errno.captured(cap);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * Waits until {@code fd} is readable, {@code wakeFd} is readable, or {@code timeoutMillis}
     * passed (negative: no timeout); EINTR is retried with the remaining time.
     *
     * @return {@link #READABLE}, {@link #WOKEN} (checked first: a close wins over an event) or
     *         {@link #TIMED_OUT}
     * @throws RuntimeException (a {@link VerbsFailure}) naming {@code verb} when poll fails or {@code fd} reports
     *         POLLERR/POLLHUP/POLLNVAL without POLLIN
     */
    public static int pollReadableOrWoken(String verb, int fd, int wakeFd, long timeoutMillis) {
        try (Arena arena = Arena.ofConfined()) {
            return pollReadableOrWoken(verb, fd, wakeFd, timeoutMillis, arena.allocate(POLLFD_PAIR_SIZE, 4));
        }
    }

    /** The scratch memory {@link #pollReadableOrWoken(String, int, int, long, MemorySegment)} needs: two {@code struct pollfd}. */
    public static final long POLLFD_PAIR_SIZE = 16;

    /**
     * {@link #pollReadableOrWoken(String, int, int, long)} with the caller's scratch memory
     * ({@link #POLLFD_PAIR_SIZE} bytes, 4-aligned, used by one thread at a time): allocates nothing.
     */
    public static int pollReadableOrWoken(String verb, int fd, int wakeFd, long timeoutMillis, MemorySegment pfd) {
        long deadline = System.nanoTime() + Math.max(0, timeoutMillis) * 1_000_000L;
        try {
            while (true) {
                int left = timeoutMillis < 0
                        ? -1
                        : (int) Math.min(
                                Integer.MAX_VALUE, Math.max(0, (deadline - System.nanoTime() + 999_999L) / 1_000_000L));
                pfd.set(JAVA_INT, 0, fd);
                pfd.set(JAVA_SHORT, 4, POLLIN);
                pfd.set(JAVA_SHORT, 6, (short) 0);
                pfd.set(JAVA_INT, 8, wakeFd);
                pfd.set(JAVA_SHORT, 12, POLLIN);
                pfd.set(JAVA_SHORT, 14, (short) 0);
                MemorySegment cap = Errno.captureSegment();
                int rc = (int) POLL.invokeExact(cap, pfd, 2L, left);
                if (rc > 0) {
                    if (pfd.get(JAVA_SHORT, 14) != 0) {
                        return WOKEN;
                    }
                    short revents = pfd.get(JAVA_SHORT, 6);
                    if ((revents & POLLIN) != 0) {
                        return READABLE;
                    }
                    throw Failures.of(
                            verb,
                            Errno.EIO,
                            "poll(2) on fd " + fd + " reported revents 0x" + Integer.toHexString(revents));
                }
                if (rc == 0) {
                    if (timeoutMillis >= 0 && System.nanoTime() - deadline >= 0) {
                        return TIMED_OUT;
                    }
                    continue;
                }
                int e = Errno.captured(cap);
                if (e != Errno.EINTR) {
                    throw Failures.of(verb, e, "poll(2) on fds " + fd + ", " + wakeFd + " failed");
                }
            }
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** Results of {@link #pollReadableOrWoken}. */
    public static final int TIMED_OUT = 0, READABLE = 1, WOKEN = 2;

    /** {@code epoll_create1(EPOLL_CLOEXEC)}: a new epoll fd. */
    public static int epollCreate(String verb) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int fd = (int) EPOLL_CREATE1.invokeExact(cap, EPOLL_CLOEXEC);
            if (fd < 0) {
                throw Failures.of(verb, Errno.captured(cap), "epoll_create1(2) failed");
            }
            return fd;
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code epoll_ctl(epfd, op, fd, {events, data})} with the caller's scratch memory
     * ({@link #EPOLL_EVENT_SIZE} bytes, 8-aligned, one thread at a time).
     *
     * @return 0, or the errno of the failure (e.g. EBADF for a closed fd)
     */
    public static int epollCtl(int epfd, int op, int fd, int events, long data, MemorySegment event) {
        try {
            event.set(JAVA_INT, 0, events);
            event.set(JAVA_LONG_UNALIGNED, EPOLL_DATA_OFFSET, data);
            MemorySegment cap = Errno.captureSegment();
            int rc = (int) EPOLL_CTL.invokeExact(cap, epfd, op, fd, event);
            return rc == 0 ? 0 : Errno.captured(cap);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /**
     * {@code epoll_wait(epfd, events, max, timeoutMillis)} ({@code events}: {@code max} entries
     * of {@link #EPOLL_EVENT_SIZE} bytes).
     *
     * @return the number of ready entries (0 on timeout), or minus the errno (EINTR included)
     */
    public static int epollWait(int epfd, MemorySegment events, int max, int timeoutMillis) {
        try {
            MemorySegment cap = Errno.captureSegment();
            int n = (int) EPOLL_WAIT.invokeExact(cap, epfd, events, max, timeoutMillis);
            return n >= 0 ? n : -Errno.captured(cap);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
    }

    /** The {@code data.u64} of entry {@code i} of an {@link #epollWait} result. */
    public static long epollData(MemorySegment events, int i) {
        return events.get(JAVA_LONG_UNALIGNED, i * EPOLL_EVENT_SIZE + EPOLL_DATA_OFFSET);
    }

    private static boolean isX86() {
        String arch = System.getProperty("os.arch");
        return "amd64".equals(arch) || "x86_64".equals(arch);
    }

    private static long pageSize() {
        MemorySegment cap = Errno.captureSegment();
        long size;
        try {
            size = (long) SYSCONF.invokeExact(cap, _SC_PAGESIZE);
        } catch (Throwable t) {
            throw InlineVerbs.rethrow(t);
        }
        if (size <= 0 || Long.bitCount(size) != 1) {
            throw Failures.create(
                    "sysconf(_SC_PAGESIZE)",
                    size < 0 ? Errno.captured(cap) : Errno.EINVAL,
                    null,
                    "the page size is " + size + ", not a power of two");
        }
        return size;
    }
}
