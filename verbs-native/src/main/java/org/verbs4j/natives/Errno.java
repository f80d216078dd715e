package org.verbs4j.natives;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * errno handling: the call-state layout every downcall with {@code captureCallState("errno")}
 * writes into, symbolic names, the C library's own text ({@code strerror}), and hints.
 *
 * <p>errno is only ever read from the capture segment of the call that set it, never later.
 * Stateless and thread-safe.
 */
public final class Errno {
    public static final int EPERM = 1,
            ENOENT = 2,
            EINTR = 4,
            EIO = 5,
            ENXIO = 6,
            EBADF = 9,
            EAGAIN = 11,
            ENOMEM = 12,
            EACCES = 13,
            EFAULT = 14,
            EBUSY = 16,
            EEXIST = 17,
            ENODEV = 19,
            EINVAL = 22,
            ENOSPC = 28,
            ERANGE = 34,
            ENOSYS = 38,
            ENODATA = 61,
            ETIME = 62,
            EPROTO = 71,
            EPROTONOSUPPORT = 93,
            EOPNOTSUPP = 95,
            EADDRINUSE = 98,
            EADDRNOTAVAIL = 99,
            ENETUNREACH = 101,
            ECONNRESET = 104,
            ENOBUFS = 105,
            ENOTCONN = 107,
            ETIMEDOUT = 110,
            ECONNREFUSED = 111,
            EHOSTUNREACH = 113,
            EALREADY = 114,
            EINPROGRESS = 115;

    /** The layout of the call state captured by {@link #CAPTURE_OPTION}. */
    public static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    /** The linker option that captures errno right after the native call. */
    public static final Linker.Option CAPTURE_OPTION = Linker.Option.captureCallState("errno");

    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    /** Linked on first use, so that describing an error never fails where native access is denied. */
    private static final class StrError {
        static final MethodHandle HANDLE = NativeBinding.symbolNoErrno(
                Linker.nativeLinker().defaultLookup(),
                "strerror",
                FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    }

    private static final ThreadLocal<MemorySegment> CAPTURE =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private Errno() {}

    /** A per-thread segment for captured call state, reused by every control-path call of that thread. */
    public static MemorySegment captureSegment() {
        MemorySegment s = CAPTURE.get();
        ERRNO.set(s, 0L, 0);
        return s;
    }

    /** Reads the errno captured into {@code capture} by the call that just returned. */
    public static int captured(MemorySegment capture) {
        return (int) ERRNO.get(capture, 0L);
    }

    /** The symbolic name of an errno, e.g. {@code EINVAL}, or {@code errno N} if unknown. */
    public static String name(int errno) {
        return switch (errno) {
            case 0 -> "OK";
            case EPERM -> "EPERM";
            case ENOENT -> "ENOENT";
            case EINTR -> "EINTR";
            case EIO -> "EIO";
            case ENXIO -> "ENXIO";
            case EBADF -> "EBADF";
            case EAGAIN -> "EAGAIN";
            case ENOMEM -> "ENOMEM";
            case EACCES -> "EACCES";
            case EFAULT -> "EFAULT";
            case EBUSY -> "EBUSY";
            case EEXIST -> "EEXIST";
            case ENODEV -> "ENODEV";
            case EINVAL -> "EINVAL";
            case ENOSPC -> "ENOSPC";
            case ERANGE -> "ERANGE";
            case ENOSYS -> "ENOSYS";
            case ENODATA -> "ENODATA";
            case ETIME -> "ETIME";
            case EPROTO -> "EPROTO";
            case EPROTONOSUPPORT -> "EPROTONOSUPPORT";
            case EOPNOTSUPP -> "EOPNOTSUPP";
            case EADDRINUSE -> "EADDRINUSE";
            case EADDRNOTAVAIL -> "EADDRNOTAVAIL";
            case ENETUNREACH -> "ENETUNREACH";
            case ECONNRESET -> "ECONNRESET";
            case ENOBUFS -> "ENOBUFS";
            case ENOTCONN -> "ENOTCONN";
            case ETIMEDOUT -> "ETIMEDOUT";
            case ECONNREFUSED -> "ECONNREFUSED";
            case EHOSTUNREACH -> "EHOSTUNREACH";
            case EALREADY -> "EALREADY";
            case EINPROGRESS -> "EINPROGRESS";
            default -> "errno " + errno;
        };
    }

    /** The C library's text for an errno ({@code strerror}). */
    public static String describe(int errno) {
        try {
            MemorySegment s = (MemorySegment) StrError.HANDLE.invokeExact(errno);
            return s.equals(MemorySegment.NULL)
                    ? "unknown error"
                    : s.reinterpret(256).getString(0);
        } catch (Throwable t) { // IllegalCallerException / its NoClassDefFoundError where native access is denied
            return "no text: native access denied";
        }
    }

    /** A hint for a verb and errno, or null where none is known. */
    public static String hint(String verb, int errno) {
        if (verb.startsWith("ibv_reg") && errno == ENOMEM) {
            return "pinning the memory failed: raise the locked-memory limit (ulimit -l unlimited, "
                    + "or memlock in /etc/security/limits.conf / LimitMEMLOCK in the systemd unit)";
        }
        if (verb.startsWith("ibv_reg") && (errno == EINVAL || errno == EACCES)) {
            return "check the access flags: remote write and remote atomic need local write; "
                    + "the region must be mapped and its address and length valid";
        }
        if (verb.equals("ibv_modify_qp") && errno == EINVAL) {
            return "the attribute mask does not match the transition (RESET->INIT needs "
                    + "STATE|PKEY_INDEX|PORT|ACCESS_FLAGS for RC/UC, STATE|PKEY_INDEX|PORT|QKEY for UD; "
                    + "INIT->RTR needs STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN(|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER for RC); "
                    + "RTR->RTS needs STATE|SQ_PSN(|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC for RC)), "
                    + "or a value is out of the device's range (GID index, MTU, port)";
        }
        if (verb.startsWith("ibv_post") && errno == ENOMEM) {
            return "the queue is full: poll completions before posting more, or create the queue pair with a larger capacity";
        }
        if (verb.startsWith("ibv_post") && errno == EINVAL) {
            return "the work request is invalid for this queue pair: check its state, opcode, number of SGEs and inline size";
        }
        if (verb.startsWith("ibv_create") && errno == ENOMEM) {
            return "the device or the locked-memory limit ran out of resources: lower the queue sizes or raise ulimit -l";
        }
        if (verb.startsWith("ibv_create") && errno == EINVAL) {
            return "a requested size exceeds the device attributes (max_qp_wr, max_sge, max_cqe, max_inline_data)";
        }
        if (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT) {
            return "this device or provider does not implement it";
        }
        if (verb.startsWith("ibv_") && (errno == EPERM || errno == EACCES)) {
            return "no permission on /dev/infiniband: run with access to the uverbs device";
        }
        return null;
    }
}
