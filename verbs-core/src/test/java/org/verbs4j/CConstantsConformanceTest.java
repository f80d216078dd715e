package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;
import org.verbs4j.testing.CBoundary;
import org.verbs4j.testing.CBoundary.Prototype;

/**
 * Every C constant written by hand in verbs-core compared with the value jextract generated from
 * the installed headers ({@code ibverbs_h.IBV_*()}, themselves checked against gcc by verbs-native's
 * LayoutConformanceTest); libc constants and descriptors (huge-page mmap) against gcc.
 *
 * <p>Reflective completeness, as LayoutConformanceTest does for layouts: every static final
 * integer field of every verbs-core class, and every constant of every verbs-core enum, must be
 * in {@link #TABLE} (a C value) or in {@link #NOT_C} (with the reason it is not one). Adding a
 * constant without an entry fails {@link #everyConstantIsClassified()}.
 */
class CConstantsConformanceTest {
    private static final String GENERATED = "org.verbs4j.natives.generated.ibverbs.";

    /** "Class.FIELD" (or "Enum.CONSTANT") -> generated name: IBV_X for ibverbs_h.IBV_X(), or type.method. */
    private static final Map<String, String> TABLE = new LinkedHashMap<>();
    /** "Class.FIELD" -> libc C expression, checked by gcc. */
    private static final Map<String, String> LIBC = new LinkedHashMap<>();
    /** "Class.FIELD" or "Enum" -> why it is not a C constant. */
    private static final Map<String, String> NOT_C = new LinkedHashMap<>();

    private static void t(Class<?> k, String field, String generated) {
        String key = k.getSimpleName() + "." + field;
        if (TABLE.put(key, generated) != null || LIBC.containsKey(key) || NOT_C.containsKey(key)) {
            throw new IllegalStateException("duplicate " + key);
        }
    }

    /** The same C prefix for a list of Java names: {@code javaPrefix + s} -> {@code cPrefix + s}. */
    private static void each(Class<?> k, String javaPrefix, String cPrefix, String... suffixes) {
        for (String s : suffixes) {
            t(k, javaPrefix + s, cPrefix + s);
        }
    }

    private static void notC(String reason, String... keys) {
        for (String k : keys) {
            if (NOT_C.put(k, reason) != null || TABLE.containsKey(k)) {
                throw new IllegalStateException("duplicate " + k);
            }
        }
    }

    static {
        each(
                QueuePairTransitions.class,
                "MASK_",
                "IBV_QP_",
                "STATE",
                "ACCESS_FLAGS",
                "PKEY_INDEX",
                "PORT",
                "QKEY",
                "AV",
                "PATH_MTU",
                "TIMEOUT",
                "RETRY_CNT",
                "RNR_RETRY",
                "RQ_PSN",
                "MAX_QP_RD_ATOMIC",
                "MIN_RNR_TIMER",
                "SQ_PSN",
                "MAX_DEST_RD_ATOMIC",
                "CAP",
                "DEST_QPN");
        each(
                SendWorkRequests.class,
                "OP_",
                "IBV_WR_",
                "RDMA_WRITE",
                "RDMA_WRITE_WITH_IMM",
                "SEND",
                "SEND_WITH_IMM",
                "RDMA_READ",
                "ATOMIC_CMP_AND_SWP",
                "ATOMIC_FETCH_AND_ADD",
                "LOCAL_INV",
                "BIND_MW",
                "SEND_WITH_INV",
                "ATOMIC_WRITE");
        each(SendWorkRequests.class, "FLAG_", "IBV_SEND_", "FENCE", "SIGNALED", "SOLICITED", "INLINE");
        each(
                SendOperation.class,
                "",
                "IBV_QP_EX_WITH_",
                "RDMA_WRITE",
                "RDMA_WRITE_WITH_IMM",
                "SEND",
                "SEND_WITH_IMM",
                "RDMA_READ",
                "ATOMIC_CMP_AND_SWP",
                "ATOMIC_FETCH_AND_ADD",
                "LOCAL_INV",
                "BIND_MW",
                "SEND_WITH_INV",
                "ATOMIC_WRITE");
        notC(
                "enum ibv_mw_type is not in the generated bindings: its values are QueuePairExLayout.MW_TYPE_*,"
                        + " which the layout conformance test compares with the header through gcc",
                "Type");
        each(
                CompletionStatus.class,
                "",
                "IBV_WC_",
                "SUCCESS",
                "LOC_LEN_ERR",
                "LOC_QP_OP_ERR",
                "LOC_EEC_OP_ERR",
                "LOC_PROT_ERR",
                "WR_FLUSH_ERR",
                "MW_BIND_ERR",
                "BAD_RESP_ERR",
                "LOC_ACCESS_ERR",
                "REM_INV_REQ_ERR",
                "REM_ACCESS_ERR",
                "REM_OP_ERR",
                "RETRY_EXC_ERR",
                "RNR_RETRY_EXC_ERR",
                "LOC_RDD_VIOL_ERR",
                "REM_INV_RD_REQ_ERR",
                "REM_ABORT_ERR",
                "INV_EECN_ERR",
                "INV_EEC_STATE_ERR",
                "FATAL_ERR",
                "RESP_TIMEOUT_ERR",
                "GENERAL_ERR",
                "TM_ERR",
                "TM_RNDV_INCOMPLETE");
        each(
                CompletionOpcode.class,
                "",
                "IBV_WC_",
                "SEND",
                "RDMA_WRITE",
                "RDMA_READ",
                "COMP_SWAP",
                "FETCH_ADD",
                "BIND_MW",
                "LOCAL_INV",
                "TSO",
                "ATOMIC_WRITE",
                "RECV",
                "RECV_RDMA_WITH_IMM");
        each(WorkCompletions.class, "", "IBV_WC_", "SUCCESS");
        each(WorkCompletions.class, "WC_", "IBV_WC_", "WITH_IMM", "GRH");
        each(
                AsyncEvent.class,
                "",
                "IBV_EVENT_",
                "CQ_ERR",
                "QP_FATAL",
                "QP_REQ_ERR",
                "QP_ACCESS_ERR",
                "COMM_EST",
                "SQ_DRAINED",
                "PATH_MIG",
                "PATH_MIG_ERR",
                "DEVICE_FATAL",
                "PORT_ACTIVE",
                "PORT_ERR",
                "LID_CHANGE",
                "PKEY_CHANGE",
                "SM_CHANGE",
                "SRQ_ERR",
                "SRQ_LIMIT_REACHED",
                "QP_LAST_WQE_REACHED",
                "CLIENT_REREGISTER",
                "GID_CHANGE",
                "WQ_FATAL");
        t(PortAttributes.class, "STATE_ACTIVE", "IBV_PORT_ACTIVE");
        t(DeviceAttributes.class, "ATOMIC_NONE", "IBV_ATOMIC_NONE");
        t(Gid.class, "BYTES", "ibv_gid.sizeof");
        t(WorkRequestChain.class, "NEXT", "ibv_send_wr.next$offset");
        t(WorkRequestChain.class, "SG_LIST", "ibv_send_wr.sg_list$offset");
        t(WorkRequestChain.class, "NUM_SGE", "ibv_send_wr.num_sge$offset");

        // enums: the C value of each constant is its value()/bit(), and of(C value) gives it back
        each(
                Access.class,
                "",
                "IBV_ACCESS_",
                "LOCAL_WRITE",
                "REMOTE_WRITE",
                "REMOTE_READ",
                "REMOTE_ATOMIC",
                "MW_BIND",
                "ZERO_BASED",
                "ON_DEMAND",
                "HUGETLB",
                "RELAXED_ORDERING");
        each(QueuePairState.class, "", "IBV_QPS_", "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN");
        each(QueuePairType.class, "", "IBV_QPT_", "RC", "UC", "UD", "XRC_SEND", "XRC_RECV");
        each(Mtu.class, "", "IBV_", "MTU_256", "MTU_512", "MTU_1024", "MTU_2048", "MTU_4096");
        t(GidType.class, "INFINIBAND", "IBV_GID_TYPE_IB");
        each(GidType.class, "", "IBV_GID_TYPE_", "ROCE_V1", "ROCE_V2");
        each(LinkLayer.class, "", "IBV_LINK_LAYER_", "UNSPECIFIED", "INFINIBAND", "ETHERNET");
        each(
                CompletionField.class,
                "",
                "IBV_WC_EX_WITH_",
                "BYTE_LEN",
                "IMM",
                "QP_NUM",
                "SRC_QP",
                "SLID",
                "SL",
                "DLID_PATH_BITS",
                "COMPLETION_TIMESTAMP",
                "CVLAN",
                "FLOW_TAG",
                "COMPLETION_TIMESTAMP_WALLCLOCK");
        notC(
                "verbs4j's masks of the fields a poll reads (bits 1 << CompletionField ordinal)",
                "CompletionQueueEx.B_BYTE_LEN",
                "CompletionQueueEx.B_IMM",
                "CompletionQueueEx.B_QP_NUM",
                "CompletionQueueEx.B_TIMESTAMP",
                "CompletionQueueEx.B_WALLCLOCK",
                "CompletionQueueEx.B_RARE");

        // the connection manager (org.verbs4j.cm): rdmacm_h names carry the prefix "rdmacm:"
        for (String n : List.of("TIMEOUT", "RETRY_CNT", "RNR_RETRY", "MAX_QP_RD_ATOMIC", "MAX_DEST_RD_ATOMIC")) {
            TABLE.put("CmStructs.MASK_" + n, "IBV_QP_" + n);
        }
        for (org.verbs4j.cm.CmEventType e : org.verbs4j.cm.CmEventType.values()) {
            TABLE.put("CmEventType." + e.name(), "rdmacm:RDMA_CM_EVENT_" + e.name());
        }
        notC("verbs4j's own states and failure kinds", "ConnectionState", "Reason", "Membership");
        TABLE.put("MulticastGroup.QKEY", "rdmacm:RDMA_UDP_QKEY");
        notC(
                "the multicast QPN of the IB spec (the kernel's IB_MULTICAST_QPN), not in the user headers",
                "MulticastGroup.MULTICAST_QPN");
        notC(
                "an InfiniBand CM reject reason (IB spec / the kernel's ib_cm.h), not in the user headers",
                "RdmaConnection.REJ_INVALID_SERVICE_ID");

        for (String n :
                List.of("PROT_READ", "PROT_WRITE", "MAP_PRIVATE", "MAP_ANONYMOUS", "MAP_HUGETLB", "MADV_HUGEPAGE")) {
            LIBC.put("HugePageAllocator." + n, n); // named as in <sys/mman.h>
        }
        LIBC.put("HugePageAllocator.MAP_FAILED", "(long)MAP_FAILED");
        for (String f : List.of("WR_ID", "SEND_FLAGS")) {
            LIBC.put("MemoryWindow.BIND_" + f, "offsetof(struct ibv_mw_bind, " + f.toLowerCase() + ")");
        }
        for (String f : List.of("MR", "ADDR", "LENGTH")) {
            LIBC.put("MemoryWindow.BIND_" + f, "offsetof(struct ibv_mw_bind, bind_info." + f.toLowerCase() + ")");
        }
        LIBC.put("MemoryWindow.BIND_ACCESS", "offsetof(struct ibv_mw_bind, bind_info.mw_access_flags)");
        LIBC.put("MemoryWindow.BIND_SIZE", "sizeof(struct ibv_mw_bind)");
        LIBC.put("OnDemandPaging.FLAG_FLUSH", "IBV_ADVISE_MR_FLAG_FLUSH");
        for (String a : List.of("PREFETCH", "PREFETCH_WRITE", "PREFETCH_NO_FAULT")) {
            LIBC.put("OnDemandPaging.ADVICE_" + a, "IBV_ADVISE_MR_ADVICE_" + a);
        }
        notC(
                "enum ibv_advise_mr_advice is not in the generated bindings: its values are"
                        + " OnDemandPaging.ADVICE_*, which this test compares with the header through gcc",
                "Advice");
        notC("verbs4j's piece of one advice (an SGE's length is 32 bits)", "OnDemandPaging.PIECE");

        notC(
                "masks of verbs4j's per-chain opcode summary (bits 1 << IBV_WR_*), not header constants",
                "SendWorkRequests.SEND_OPCODES",
                "SendWorkRequests.READ_OR_ATOMIC_OPCODES",
                "SendWorkRequests.NO_PAYLOAD_OPCODES",
                "SendWorkRequests.EXTENDED_ONLY_OPCODES");
        notC(
                "the kernel uAPI's IB_UVERBS_DEVICE_* bits of device_cap_flags_ex, which libibverbs 44's"
                        + " verbs.h (the bindings' header) does not name",
                "Capabilities.DEVICE_FLUSH_GLOBAL",
                "Capabilities.DEVICE_FLUSH_PERSISTENT",
                "Capabilities.DEVICE_ATOMIC_WRITE");
        notC(
                "rdma-core 45's IBV_ACCESS_FLUSH_* (1 << 8, 1 << 9), which libibverbs 44's verbs.h (the"
                        + " bindings' header) does not have; the kernel's IB_ACCESS_FLUSH_* are the same bits",
                "Access.FLUSH_GLOBAL",
                "Access.FLUSH_PERSISTENT");
        notC(
                "a verbs4j default or tuning value",
                "SendWorkRequests.DEFAULT_INLINE_BYTES",
                "AsyncEventDispatcher.QUEUE_CAPACITY",
                "AsyncEventDispatcher.JOIN_MILLIS",
                "AsyncEventDispatcher.MAX_CONSECUTIVE_FAILURES",
                "CompletionChannel.CLOSE_WAIT_MILLIS",
                "CompletionQueue.ACK_BATCH",
                "Gate.CLOSE_WAIT_NANOS",
                "NativeResource.CLOSING_WAIT_NANOS",
                "BufferPool.MAX_PARK_NANOS",
                "LeaseViews.CLOSE_WAIT_NANOS",
                "SetupFuture.SETTLING_NANOS",
                "RdmaConnection.RELEASE_QUIET_NANOS",
                "RdmaConnection.RELEASE_HOLD_NANOS");
        notC(
                "a state of verbs4j's own lifecycle machines",
                "Gate.IDLE",
                "Gate.BUSY",
                "Gate.CLOSED",
                "NativeResource.OPEN",
                "NativeResource.CLOSING",
                "NativeResource.CLOSED",
                "PoolResources.OPEN",
                "PoolResources.CLOSING",
                "PoolResources.CLOSED",
                "PoolResources.RELEASING");
        notC(
                "the buffer pool's slot and token encoding",
                "BufferPool.NO_TOKEN",
                "BufferPool.STATE_SHIFT",
                "BufferPool.FREE",
                "BufferPool.LEASED",
                "BufferPool.LEAKED",
                "BufferPool.STATE_BITS",
                "BufferPool.LEASE_STEP",
                "BufferPool.PIN_WORD",
                "BufferPool.MAX_BUFFERS",
                "LeaseRefusals.STALE_WINDOW",
                "FreeStack.EMPTY");
        notC("the machine's page size, read with sysconf(_SC_PAGESIZE) at run time", "PoolMemory.REGION_ALIGNMENT");
        notC(
                "the size of verbs4j's own scratch memory (two pointers and two struct pollfd)",
                "CompletionChannel.SCRATCH_SIZE");
        notC("the default huge page size of x86-64 and arm64, a kernel setting", "HugePageAllocator.HUGE_PAGE");
        notC("verbs4j's out-of-band wire format", "OutOfBandChannel.MAGIC");
        notC(
                "the fd poller's epoll fd (opened at run time) and its batch and scratch sizes",
                "Poller.EPOLL_FD",
                "FdReadiness.BATCH",
                "FdReadiness.SCRATCH_SIZE");
        notC("verbs4j's longest wait (Long.MAX_VALUE / 2 ns)", "Timeouts.FOREVER_NANOS", "Timeouts.MAX_SECONDS");
        notC("verbs4j's own reading of the dma-buf probe's errno", "Verdict");
        notC("how an event loop's wait ended (LoopWaiter), verbs4j's own", "Outcome");
        notC("the closed mark of LoopWaiter's count of wake-ups in flight, verbs4j's own", "LoopWaiter.CLOSED");
    }

    private static Map<String, Long> libcValues;
    private static Map<String, CBoundary.Derived> libcFunctions;

    /** HugePageAllocator's descriptors: field -> (C function, positions where a pointer travels as a long). */
    private static final Map<String, Prototype> DESCRIPTORS = new LinkedHashMap<>();

    private static final Map<String, Set<Integer>> POINTER_AS_LONG = new LinkedHashMap<>();

    static {
        // HugePageAllocator passes and returns addresses as long (documented at each descriptor)
        DESCRIPTORS.put("MMAP_DESCRIPTOR", new Prototype("mmap", "void *(void *, size_t, int, int, int, off_t)"));
        POINTER_AS_LONG.put("mmap", Set.of(0, 1));
        DESCRIPTORS.put("MUNMAP_DESCRIPTOR", new Prototype("munmap", "int (void *, size_t)"));
        POINTER_AS_LONG.put("munmap", Set.of(1));
        DESCRIPTORS.put("MADVISE_DESCRIPTOR", new Prototype("madvise", "int (void *, size_t, int)"));
        POINTER_AS_LONG.put("madvise", Set.of(1));
    }

    /** The gcc probe, run by the tests that need it (so the jextract comparisons run without a C toolchain). */
    private static synchronized void probe() {
        if (libcValues != null) {
            return;
        }
        Map<String, String> exprs = new LinkedHashMap<>();
        LIBC.forEach((k, v) -> exprs.put(k.replace('.', '_'), v));
        CBoundary.Probe p = CBoundary.probe(
                "core_libc_probe",
                List.of("sys/mman.h", "infiniband/verbs.h"),
                List.copyOf(DESCRIPTORS.values()),
                exprs);
        Map<String, Long> values = new LinkedHashMap<>();
        LIBC.keySet().forEach(k -> values.put(k, p.constants().get(k.replace('.', '_'))));
        libcFunctions = p.functions();
        libcValues = values;
    }

    // ---- the classes of verbs-core --------------------------------------------------------

    /** Every class of verbs-core's main output, nested ones included. */
    static List<Class<?>> coreClasses() throws IOException, URISyntaxException, ClassNotFoundException {
        Path root = Path.of(
                Access.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assertTrue(Files.isDirectory(root), "verbs-core's classes are not a folder: " + root);
        List<Class<?>> out = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p :
                    s.filter(f -> f.toString().endsWith(".class")).sorted().toList()) {
                String rel = root.relativize(p).toString();
                if (rel.endsWith("module-info.class") || rel.endsWith("package-info.class")) {
                    continue;
                }
                String name = rel.substring(0, rel.length() - 6).replace('/', '.');
                out.add(Class.forName(name, false, CConstantsConformanceTest.class.getClassLoader()));
            }
        }
        return out;
    }

    private static boolean integral(Class<?> t) {
        return t == int.class || t == long.class || t == short.class || t == byte.class;
    }

    private static boolean constant(Field f) {
        int m = f.getModifiers();
        return Modifier.isStatic(m)
                && Modifier.isFinal(m)
                && !f.isSynthetic()
                && integral(f.getType())
                && !f.getName().equals("serialVersionUID");
    }

    @Test
    void everyConstantIsClassified() throws Exception {
        List<String> missing = new ArrayList<>();
        Set<String> seen = new java.util.TreeSet<>();
        int classes = 0;
        for (Class<?> k : coreClasses()) {
            classes++;
            String owner = k.getSimpleName();
            if (k.isEnum() && !NOT_C.containsKey(owner)) {
                for (Object c : k.getEnumConstants()) {
                    String key = owner + "." + ((Enum<?>) c).name();
                    seen.add(key);
                    if (!TABLE.containsKey(key) && !NOT_C.containsKey(key)) { // NOT_C: a C name the header lacks
                        missing.add(key);
                    }
                }
            } else if (k.isEnum()) {
                seen.add(owner);
            }
            for (Field f : k.getDeclaredFields()) {
                if (constant(f)) {
                    String key = owner + "." + f.getName();
                    if (!TABLE.containsKey(key) && !LIBC.containsKey(key) && !NOT_C.containsKey(key)) {
                        missing.add(key);
                    }
                    seen.add(key);
                }
            }
        }
        assertTrue(classes >= 50, "found only " + classes + " verbs-core classes");
        assertTrue(
                missing.isEmpty(),
                "constants with no entry in CConstantsConformanceTest (add the C name to TABLE "
                        + "or LIBC, or say in NOT_C why it is not a C constant): " + missing);
        List<String> stale = new ArrayList<>();
        Stream.of(TABLE.keySet(), LIBC.keySet(), NOT_C.keySet())
                .flatMap(Set::stream)
                .filter(k -> !seen.contains(k))
                .forEach(stale::add);
        assertTrue(stale.isEmpty(), "entries naming no constant of verbs-core: " + stale);
    }

    // ---- the comparison ----------------------------------------------------------------------

    private static long generated(String name) throws ReflectiveOperationException {
        if (name.startsWith("rdmacm:")) {
            return ((Number) org.verbs4j
                            .natives
                            .generated
                            .rdmacm
                            .rdmacm_h
                            .class
                            .getMethod(name.substring(7))
                            .invoke(null))
                    .longValue();
        }
        int dot = name.indexOf('.');
        Method m = dot < 0
                ? ibverbs_h.class.getMethod(name)
                : Class.forName(GENERATED + name.substring(0, dot)).getMethod(name.substring(dot + 1));
        return ((Number) m.invoke(null)).longValue();
    }

    private static Class<?> ownerOf(String simpleName) throws Exception {
        for (Class<?> k : coreClasses()) {
            if (k.getSimpleName().equals(simpleName)) {
                return k;
            }
        }
        throw new AssertionError("no verbs-core class " + simpleName);
    }

    /** The C value a Java constant stands for: a field's value, or an enum constant's value()/bit(). */
    private static Long javaValue(Class<?> owner, String member) throws ReflectiveOperationException {
        if (owner.isEnum()) {
            Object c = enumConstant(owner, member);
            for (String accessor : List.of("value", "bit")) {
                try {
                    Method m = owner.getDeclaredMethod(accessor);
                    m.setAccessible(true);
                    return ((Number) m.invoke(c)).longValue();
                } catch (NoSuchMethodException e) {
                    // try the next
                }
            }
            return null; // an enum without a value: only of(C value) is checked
        }
        Field f = owner.getDeclaredField(member);
        f.setAccessible(true);
        return ((Number) f.get(null)).longValue();
    }

    private static Object enumConstant(Class<?> owner, String name) {
        for (Object c : owner.getEnumConstants()) {
            if (((Enum<?>) c).name().equals(name)) {
                return c;
            }
        }
        throw new AssertionError(owner.getSimpleName() + " has no constant " + name);
    }

    /** {@code Enum.of(int)} of the C value, where the enum has one; what it threw, if it did. */
    private static Object enumOf(Class<?> owner, long cValue) throws ReflectiveOperationException {
        Method of = owner.getDeclaredMethod("of", int.class);
        of.setAccessible(true);
        try {
            return of.invoke(null, (int) cValue);
        } catch (java.lang.reflect.InvocationTargetException e) {
            return e.getCause();
        }
    }

    @Test
    void everyHandWrittenConstantHasTheGeneratedValue() throws Exception {
        List<String> bad = new ArrayList<>();
        Map<String, Class<?>> owners = new TreeMap<>();
        for (Map.Entry<String, String> e : TABLE.entrySet()) {
            String[] om = e.getKey().split("\\.");
            Class<?> owner = owners.computeIfAbsent(om[0], n -> {
                try {
                    return ownerOf(n);
                } catch (Exception x) {
                    throw new AssertionError(x);
                }
            });
            long c = generated(e.getValue());
            Long java = javaValue(owner, om[1]);
            if (java != null && java != c) {
                bad.add(e.getKey() + ": Java " + java + ", C " + c + "   [" + e.getValue() + "]");
            }
            if (owner.isEnum()) {
                Object back;
                try {
                    back = enumOf(owner, c);
                } catch (NoSuchMethodException x) {
                    if (java == null) {
                        bad.add(e.getKey() + ": an enum with neither value()/bit() nor of(int) cannot be checked");
                    }
                    continue;
                }
                Object expected = enumConstant(owner, om[1]);
                if (back != expected) {
                    bad.add(e.getKey() + ": " + owner.getSimpleName() + ".of(" + c + ") is " + back + "   ["
                            + e.getValue() + "]");
                }
            }
        }
        System.out.printf(
                "CConstantsConformanceTest: %d hand-written constants compared with jextract's, "
                        + "%d libc constants and %d descriptors with gcc's%n",
                TABLE.size(), LIBC.size(), DESCRIPTORS.size());
        CBoundary.assertNoDifferences("hand-written constants vs jextract", TABLE.size(), bad);
        assertTrue(TABLE.size() >= 120, "expected the whole table, got " + TABLE.size());
    }

    @Test
    void mtuBytesFollowTheValue() {
        for (Mtu m : Mtu.values()) {
            assertEquals(128 << m.value(), m.bytes(), m + ": ibv_mtu n is 128 << n bytes");
        }
    }

    @Test
    void workRequestChainOffsetsHoldForReceiveRequestsToo() {
        // WorkRequestChain walks send and receive chains with the same offsets
        assertEquals(
                org.verbs4j.natives.generated.ibverbs.ibv_send_wr.next$offset(),
                org.verbs4j.natives.generated.ibverbs.ibv_recv_wr.next$offset());
        assertEquals(
                org.verbs4j.natives.generated.ibverbs.ibv_send_wr.sg_list$offset(),
                org.verbs4j.natives.generated.ibverbs.ibv_recv_wr.sg_list$offset());
        assertEquals(
                org.verbs4j.natives.generated.ibverbs.ibv_send_wr.num_sge$offset(),
                org.verbs4j.natives.generated.ibverbs.ibv_recv_wr.num_sge$offset());
    }

    @Test
    void libcConstantsMatchGcc() throws Exception {
        probe();
        List<String> bad = new ArrayList<>();
        for (Map.Entry<String, String> e : LIBC.entrySet()) {
            String[] om = e.getKey().split("\\.");
            long java = javaValue(ownerOf(om[0]), om[1]);
            long c = libcValues.get(e.getKey());
            if (java != c) {
                bad.add(e.getKey() + ": Java " + java + ", C " + c + "   [" + e.getValue() + "]");
            }
        }
        CBoundary.assertNoDifferences("libc constants", LIBC.size(), bad);
    }

    // ---- descriptors --------------------------------------------------------------------------

    @Test
    void everyHandWrittenDescriptorMatchesTheCPrototype() throws Exception {
        probe();
        Class<?> owner = ownerOf("HugePageAllocator");
        List<String> bad = new ArrayList<>();
        for (Map.Entry<String, Prototype> e : DESCRIPTORS.entrySet()) {
            Field f = owner.getDeclaredField(e.getKey());
            f.setAccessible(true);
            String fn = e.getValue().name();
            CBoundary.Derived c = libcFunctions.get(fn);
            bad.addAll(CBoundary.compare(
                    fn,
                    (FunctionDescriptor) f.get(null),
                    c.descriptor(),
                    c.variadic(),
                    POINTER_AS_LONG.getOrDefault(fn, Set.of()),
                    -1));
        }
        CBoundary.assertNoDifferences("verbs-core descriptors", DESCRIPTORS.size(), bad);
    }

    /**
     * Completeness: every static FunctionDescriptor field of verbs-core is in {@link #DESCRIPTORS},
     * and the sources build no descriptor outside such a field.
     */
    @Test
    void everyDescriptorIsInTheTable() throws Exception {
        List<String> fields = new ArrayList<>();
        for (Class<?> k : coreClasses()) {
            for (Field f : k.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) && f.getType() == FunctionDescriptor.class) {
                    fields.add(k.getSimpleName() + "." + f.getName());
                }
            }
        }
        List<String> expected =
                DESCRIPTORS.keySet().stream().map(n -> "HugePageAllocator." + n).toList();
        assertEquals(
                expected, fields, "FunctionDescriptor fields of verbs-core vs CConstantsConformanceTest.DESCRIPTORS");
        Path src = Path.of("src/main/java");
        assertTrue(Files.isDirectory(src), "run from the verbs-core module folder: " + src.toAbsolutePath());
        Pattern made = Pattern.compile("FunctionDescriptor\\.(of|ofVoid)\\(");
        int count = 0;
        try (Stream<Path> s = Files.walk(src)) {
            for (Path p : s.filter(f -> f.toString().endsWith(".java")).toList()) {
                Matcher m = made.matcher(Files.readString(p));
                while (m.find()) {
                    count++;
                }
            }
        }
        assertEquals(
                fields.size(),
                count,
                "descriptors built in verbs-core's sources outside a static field "
                        + "(declare each as a static final field and add it to DESCRIPTORS)");
    }
}
