package org.verbs4j.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;

/**
 * Waits until a file descriptor is readable without blocking the waiting thread in native code.
 * A thread that blocks in {@code poll(2)} inside a downcall pins its carrier when it is virtual
 * (64 virtual waiters then take turns on the few carriers), and an interrupt does not wake it.
 * Here one daemon platform thread per JVM blocks in {@code epoll_wait(2)} over every watched fd
 * and unparks the threads waiting on an fd when it becomes readable; a waiter parks with
 * {@link LockSupport#parkNanos}, which unmounts a virtual thread and returns at an interrupt,
 * an unpark or the deadline. Each fd is registered one-shot and re-armed by each wait, so a
 * readable fd that nobody reads does not keep the poller spinning. Not API.
 *
 * <p>A waiter adds itself to its watch, then arms the fd, then parks: a readiness the poller
 * reports after the arming finds it in the set, and an unpark that comes before the park makes
 * the park return at once. Wake-ups may be spurious; the caller retries its non-blocking read.
 */
public final class FdReadiness {
    private static final Logger LOG = LoggerFactory.getLogger(FdReadiness.class);
    private static final int BATCH = 64;
    private static final AtomicLong IDS = new AtomicLong();
    private static final Map<Long, Watch> WATCHES = new ConcurrentHashMap<>();

    private FdReadiness() {}

    /** The epoll fd and its thread, created at the first watch. */
    private static final class Poller {
        static final int EPOLL_FD = LibC.epollCreate("epoll_create1");

        static {
            Thread.ofPlatform().daemon().name("verbs4j-fd-poller").start(Poller::run);
        }

        private static void run() {
            MemorySegment events = Arena.global().allocate(BATCH * LibC.EPOLL_EVENT_SIZE, 8);
            while (true) {
                int n = LibC.epollWait(EPOLL_FD, events, BATCH, -1);
                if (n < 0) {
                    if (-n != Errno.EINTR) {
                        LOG.error(
                                "verbs4j: epoll_wait(2) failed: {}; waiters fall back to their deadlines",
                                Errno.name(-n));
                        LockSupport.parkNanos(100_000_000L);
                    }
                    continue;
                }
                for (int i = 0; i < n; i++) {
                    Watch w = WATCHES.get(LibC.epollData(events, i));
                    if (w != null) { // null: unwatched meanwhile
                        w.wakeAll();
                    }
                }
            }
        }
    }

    /**
     * Starts watching {@code fd} (registered disarmed); {@link Watch#close()} stops it, and must
     * come before the fd is closed.
     *
     * @throws VerbsException naming {@code verb} when epoll refuses the fd
     */
    public static Watch watch(String verb, int fd) {
        Watch w = new Watch(fd, IDS.incrementAndGet());
        WATCHES.put(w.id, w);
        try (Arena arena = Arena.ofConfined()) {
            int e = LibC.epollCtl(
                    Poller.EPOLL_FD, LibC.EPOLL_CTL_ADD, fd, LibC.EPOLLONESHOT, w.id, arena.allocate(16, 8));
            if (e != 0) {
                WATCHES.remove(w.id);
                throw VerbsException.create(
                        verb, e, "epoll_ctl(2) refused fd " + fd, "pass an open fd that supports poll(2)");
            }
        }
        return w;
    }

    /** The scratch memory {@link Watch#await} needs: one {@code struct epoll_event}. */
    public static final long SCRATCH_SIZE = 16;

    /** One watched fd and the threads waiting on it. Thread-safe. */
    public static final class Watch {
        private final int fd;
        private final long id;
        private final Set<Thread> waiters = ConcurrentHashMap.newKeySet();

        private Watch(int fd, long id) {
            this.fd = fd;
            this.id = id;
        }

        /**
         * Parks the calling thread until the fd may be readable, {@link #wakeAll()} runs, the
         * thread is interrupted (its status stays set) or {@code nanos} passed, whichever comes
         * first; the caller tells them apart. Parking unmounts a virtual thread.
         *
         * @param scratch {@link #SCRATCH_SIZE} bytes, 8-aligned, of the calling thread
         * @throws VerbsException naming {@code verb} when the fd can no longer be armed (e.g. EBADF)
         */
        public void await(String verb, long nanos, MemorySegment scratch) {
            Thread me = Thread.currentThread();
            waiters.add(me);
            try {
                int e = LibC.epollCtl(
                        Poller.EPOLL_FD, LibC.EPOLL_CTL_MOD, fd, LibC.EPOLLIN | LibC.EPOLLONESHOT, id, scratch);
                if (e != 0) {
                    throw VerbsException.create(
                            verb,
                            e,
                            "waiting for fd " + fd + " to become readable (epoll_ctl(2))",
                            "do not close the fd behind the object that owns it");
                }
                if (nanos > 0) {
                    LockSupport.parkNanos(this, nanos);
                }
            } finally {
                waiters.remove(me);
            }
        }

        /** Unparks every thread in {@link #await} (e.g. at close). */
        public void wakeAll() {
            for (Thread t : waiters) {
                LockSupport.unpark(t);
            }
        }

        /** How many threads are in {@link #await} (for tests). */
        public int waiting() {
            return waiters.size();
        }

        /** Stops watching; the fd may be closed afterwards. Idempotent. */
        public void close() {
            if (WATCHES.remove(id) != null) {
                try (Arena arena = Arena.ofConfined()) {
                    LibC.epollCtl(Poller.EPOLL_FD, LibC.EPOLL_CTL_DEL, fd, 0, id, arena.allocate(16, 8));
                }
            }
        }
    }
}
