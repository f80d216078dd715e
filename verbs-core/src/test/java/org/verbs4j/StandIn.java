package org.verbs4j;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * Reflective access to verbs-native's test helper {@code org.verbs4j.natives.StandInProvider}.
 *
 * <p>Why reflection: that class lives in the test-jar in package {@code org.verbs4j.natives},
 * which the named module {@code org.verbs4j.natives} owns. verbs-core's tests are compiled as a
 * patch of module {@code org.verbs4j.core}, so javac cannot see a class of that package on the
 * class path (a split package). At run time (surefire with {@code useModulePath=false}, and the
 * guest's console launcher) everything is on the class path and the class loads normally.
 */
final class StandIn implements AutoCloseable {
    static final String CLASS = "org.verbs4j.natives.StandInProvider";
    static final int QP_NUM = 0x4242;
    static final int CQE = 256;

    /** One WQE of the stand-in's ring. */
    record Wqe(long wrId, long addr, int length, int lkey, int opcode, int sendFlags, long remoteAddr, int rkey,
               int imm, int numSge, int totalLength) {
    }

    private final Object p;
    private final Class<?> type;

    private StandIn(Object p) {
        this.p = p;
        this.type = p.getClass();
    }

    /** {@code StandInProvider.open()}: compiles the stand-in (skips/fails the test without gcc as it documents). */
    static StandIn open() {
        try {
            return new StandIn(Class.forName(CLASS).getMethod("open").invoke(null));
        } catch (ReflectiveOperationException e) {
            throw unwrap(e);
        }
    }

    private Object call(String name, Object... args) {
        try {
            for (Method m : type.getMethods()) {
                if (m.getName().equals(name) && m.getParameterCount() == args.length) {
                    return m.invoke(p, args);
                }
            }
            throw new NoSuchMethodException(CLASS + "." + name + "/" + args.length);
        } catch (ReflectiveOperationException e) {
            throw unwrap(e);
        }
    }

    private static RuntimeException unwrap(ReflectiveOperationException e) {
        if (e instanceof InvocationTargetException ite) {
            Throwable t = ite.getCause();
            if (t instanceof RuntimeException r) {
                throw r;
            }
            if (t instanceof Error err) {
                throw err;
            }
        }
        return new IllegalStateException(e);
    }

    MemorySegment context() {
        return (MemorySegment) call("context");
    }

    MemorySegment qp() {
        return (MemorySegment) call("qp");
    }

    MemorySegment cq() {
        return (MemorySegment) call("cq");
    }

    MemorySegment makeQp(MemorySegment ctx, int qpNum, int qpType) {
        return (MemorySegment) call("makeQp", ctx, qpNum, qpType);
    }

    /** Calls of an op ({@code POST_SEND, POST_RECV, POST_SRQ_RECV, POLL_CQ, ...}) since the last reset. */
    long calls(String op) {
        try {
            @SuppressWarnings({"unchecked", "rawtypes"})
            Object e = Enum.valueOf((Class) Class.forName(CLASS + "$Op"), op);
            return (long) call("calls", e);
        } catch (ClassNotFoundException ex) {
            throw new IllegalStateException(ex);
        }
    }

    long wqeCount() {
        return (long) call("wqeCount");
    }

    Wqe wqe(long index) {
        Object w = call("wqe", index);
        try {
            Class<?> c = w.getClass();
            return new Wqe((long) c.getMethod("wrId").invoke(w), (long) c.getMethod("addr").invoke(w),
                    (int) c.getMethod("length").invoke(w), (int) c.getMethod("lkey").invoke(w),
                    (int) c.getMethod("opcode").invoke(w), (int) c.getMethod("sendFlags").invoke(w),
                    (long) c.getMethod("remoteAddr").invoke(w), (int) c.getMethod("rkey").invoke(w),
                    (int) c.getMethod("imm").invoke(w), (int) c.getMethod("numSge").invoke(w),
                    (int) c.getMethod("totalLength").invoke(w));
        } catch (ReflectiveOperationException e) {
            throw unwrap(e);
        }
    }

    long lastQp() {
        return (long) call("lastQp");
    }

    long lastWr() {
        return (long) call("lastWr");
    }

    @Override
    public void close() {
        call("close");
    }
}
