package org.verbs4j.natives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.generated.ibverbs.ibverbs_h;
import org.verbs4j.natives.generated.rdmacm.rdmacm_h;
import org.verbs4j.testing.CBoundary;
import org.verbs4j.testing.CBoundary.Prototype;

/**
 * Every hand-written downcall of verbs-native (all are linked through {@link NativeBinding})
 * compared, argument by argument, with the C declaration of the same function: jextract's
 * descriptor for the exported verbs ({@code ibverbs_h.X$descriptor()}) and for the function
 * pointers of {@code ibv_context_ops} / {@code verbs_context} (the nested classes'
 * {@code descriptor()}); for the C library, a descriptor derived from the prototype, which gcc
 * confirms against the installed header. Also the libc constants {@link LibC} writes by hand.
 *
 * <p>Deliberate differences are rules here, not skips: a pointer may travel as {@code JAVA_LONG}
 * only at the positions {@link #POINTER_AS_LONG} lists (each documented where the handle is
 * declared); only the data-path ops may be critical; errno capture and the function-pointer
 * argument show in the handle's type exactly as the binding says.
 */
class FunctionDescriptorConformanceTest {
    private static final String GENERATED = "org.verbs4j.natives.generated.ibverbs.";

    /** Positions (0 return, 1.. parameters) where a C pointer is passed as a long, and why. */
    private static final Map<String, Set<Integer>> POINTER_AS_LONG = new LinkedHashMap<>();

    static {
        // LibIbverbs.IBV_REG_MR / IBV_REG_MR_IOVA2: "the address travels as a long" (registration of any address)
        POINTER_AS_LONG.put("ibv_reg_mr", Set.of(2));
        POINTER_AS_LONG.put("ibv_reg_mr_iova2", Set.of(2));
        // InlineVerbs (class doc): on the data path "pointer arguments travel as long"
        POINTER_AS_LONG.put("ibv_context_ops.post_send", Set.of(1, 2, 3));
        POINTER_AS_LONG.put("ibv_context_ops.post_recv", Set.of(1, 2, 3));
        POINTER_AS_LONG.put("ibv_context_ops.poll_cq", Set.of(1, 3));
        POINTER_AS_LONG.put("ibv_context_ops.req_notify_cq", Set.of(1));
        // ExtendedPostVerbs (class doc): the ibv_wr_* data path passes pointers as long
        POINTER_AS_LONG.put("ibv_qp_ex.wr_send", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_complete", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_send_imm", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_rdma_write", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_rdma_write_imm", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_atomic_fetch_add", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_atomic_cmp_swp", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_bind_mw", Set.of(1, 2, 4));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_set_sge_list", Set.of(1, 3));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_set_sge", Set.of(1));
        POINTER_AS_LONG.put("ibv_qp_ex.wr_set_ud_addr", Set.of(1, 2));
    }

    /**
     * The only ops that may be linked critical: they neither block nor call back into Java (and are
     * linked both ways, for providers whose post is a system call). req_notify_cq is not one.
     */
    private static final Set<String> MAY_BE_CRITICAL = Set.of(
            "ibv_context_ops.post_send",
            "ibv_context_ops.post_recv",
            "ibv_context_ops.poll_cq",
            "ibv_qp_ex.wr_send",
            "ibv_qp_ex.wr_complete",
            "ibv_qp_ex.wr_send_imm",
            "ibv_qp_ex.wr_rdma_write",
            "ibv_qp_ex.wr_rdma_write_imm",
            "ibv_qp_ex.wr_atomic_fetch_add",
            "ibv_qp_ex.wr_atomic_cmp_swp",
            "ibv_qp_ex.wr_bind_mw",
            "ibv_qp_ex.wr_set_sge_list",
            "ibv_qp_ex.wr_set_sge",
            "ibv_qp_ex.wr_set_ud_addr");

    /** The C library functions verbs-native calls, as their headers declare them. */
    private static final List<Prototype> LIBC = List.of(
            new Prototype("poll", "int (struct pollfd *, nfds_t, int)"),
            new Prototype("fcntl", "int (int, int, ...)"),
            new Prototype("eventfd", "int (unsigned int, int)"),
            new Prototype("write", "ssize_t (int, const void *, size_t)"),
            new Prototype("read", "ssize_t (int, void *, size_t)"),
            new Prototype("close", "int (int)"),
            new Prototype("open", "int (const char *, int, ...)"),
            new Prototype("sysconf", "long (int)"),
            new Prototype("epoll_create1", "int (int)"),
            new Prototype("epoll_ctl", "int (int, int, int, struct epoll_event *)"),
            new Prototype("epoll_wait", "int (int, struct epoll_event *, int, int)"),
            new Prototype("strerror", "char *(int)"));

    /** LibC's hand-written constants, named as in C; every int/short constant of LibC must be here or in NOT_C. */
    private static final List<String> LIBC_CONSTANTS = List.of(
            "POLLIN",
            "POLLERR",
            "POLLHUP",
            "POLLNVAL",
            "O_NONBLOCK",
            "EFD_CLOEXEC",
            "F_GETFL",
            "F_SETFL",
            "_SC_PAGESIZE",
            "EPOLLIN",
            "EPOLLONESHOT",
            "EPOLL_CTL_ADD",
            "EPOLL_CTL_DEL",
            "EPOLL_CTL_MOD",
            "EPOLL_CLOEXEC");

    /** LibC constants that are not C's: the results of pollReadableOrWoken. */
    private static final Set<String> NOT_C = Set.of("TIMED_OUT", "READABLE", "WOKEN");

    private static List<NativeBinding> bindings;
    /**
     * librdmacm functions bound by hand that the committed jextract output does not hold (rdmacm.args
     * predates them): their reference is the prototype, which gcc confirms against rdma_cma.h.
     */
    private static final List<Prototype> RDMACM_BY_HAND = List.of(
            new Prototype("rdma_join_multicast", "int (struct rdma_cm_id *, struct sockaddr *, void *)"),
            new Prototype("rdma_leave_multicast", "int (struct rdma_cm_id *, struct sockaddr *)"));

    /**
     * Function-pointer members of a struct the committed jextract output does not hold
     * ({@code struct ibv_dm}): their reference is the prototype of the verbs.h inline that calls
     * the member with its own parameters, which gcc confirms against the header.
     */
    private static final Map<String, Prototype> MEMBERS_BY_HAND = Map.of(
            "ibv_dm.memcpy_to_dm",
            new Prototype("ibv_memcpy_to_dm", "int (struct ibv_dm *, uint64_t, const void *, size_t)"),
            "ibv_dm.memcpy_from_dm",
            new Prototype("ibv_memcpy_from_dm", "int (void *, struct ibv_dm *, uint64_t, size_t)"));

    private static CBoundary.Probe probe, rdmacmProbe, memberProbe;

    /** Initialises every class of this module that binds downcalls (each records its bindings). */
    static void loadBindingClasses() throws ClassNotFoundException {
        for (String k : List.of(
                "LibIbverbs",
                "InlineVerbs",
                "LibC",
                "Errno$StrError",
                "LibRdmacm",
                "ExtendedPostVerbs",
                "DomainVerbs",
                "XrcVerbs")) {
            Class.forName("org.verbs4j.natives." + k, true, FunctionDescriptorConformanceTest.class.getClassLoader());
        }
    }

    @BeforeAll
    static void link() throws Exception {
        loadBindingClasses();
        bindings = List.copyOf(NativeBinding.ALL);
        loadIbverbsForTheGeneratedLookup();
        Map<String, String> consts = new LinkedHashMap<>();
        Stream.concat(LIBC_CONSTANTS.stream(), Stream.of("EFD_NONBLOCK")).forEach(n -> consts.put(n, n));
        probe = CBoundary.probe(
                "libc_probe",
                List.of("poll.h", "fcntl.h", "unistd.h", "string.h", "sys/eventfd.h", "sys/epoll.h"),
                LIBC,
                consts);
        rdmacmProbe = CBoundary.probe("rdmacm_probe", List.of("rdma/rdma_cma.h"), RDMACM_BY_HAND, Map.of());
        memberProbe = CBoundary.probe(
                "member_probe", List.of("infiniband/verbs.h"), List.copyOf(MEMBERS_BY_HAND.values()), Map.of());
    }

    /**
     * The generated holders resolve their symbol with {@code SymbolLookup.loaderLookup()} when
     * first touched (even for {@code $descriptor()}), so the library verbs4j opened (by soname,
     * not through a class loader) is loaded once more with {@code System.load}, from the path
     * the dynamic loader mapped it at.
     */
    private static void loadIbverbsForTheGeneratedLookup() throws IOException {
        String path = null;
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            int slash = line.indexOf('/');
            if (slash > 0 && line.substring(slash).matches(".*/libibverbs\\.so[.0-9]*")) {
                path = line.substring(slash).trim();
                break;
            }
        }
        assertTrue(path != null, "libibverbs is not mapped although LibIbverbs initialised");
        System.load(path);
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            int slash = line.indexOf('/');
            if (slash > 0 && line.substring(slash).matches(".*/librdmacm\\.so[.0-9]*")) {
                System.load(line.substring(slash).trim());
                return;
            }
        }
        throw new AssertionError("librdmacm is not mapped although LibRdmacm initialised");
    }

    /** jextract's (or the derived) descriptor of the C function a binding names, and whether it is variadic. */
    private static CBoundary.Derived reference(String name) throws ReflectiveOperationException {
        CBoundary.Derived libc = probe.functions().get(name);
        if (libc != null) {
            return libc;
        }
        CBoundary.Derived byHand = rdmacmProbe.functions().get(name);
        if (byHand != null) {
            return byHand;
        }
        Prototype member = MEMBERS_BY_HAND.get(name);
        if (member != null) {
            return memberProbe.functions().get(member.name());
        }
        if (name.contains(".")) { // a function-pointer member: struct.member -> generated nested class
            Class<?> k = Class.forName(GENERATED + name.replace('.', '$'));
            return new CBoundary.Derived(
                    (FunctionDescriptor) k.getMethod("descriptor").invoke(null), false);
        }
        Class<?> header = name.startsWith("rdma_") ? rdmacm_h.class : ibverbs_h.class;
        return new CBoundary.Derived(
                (FunctionDescriptor) header.getMethod(name + "$descriptor").invoke(null), false);
    }

    @Test
    void everyHandWrittenDescriptorMatchesTheCDeclaration() throws Exception {
        List<String> bad = new ArrayList<>();
        int libc = 0, exported = 0, pointers = 0, byHand = 0;
        for (NativeBinding b : bindings) {
            CBoundary.Derived ref = reference(b.name());
            bad.addAll(CBoundary.compare(
                    b.name(),
                    b.descriptor(),
                    ref.descriptor(),
                    ref.variadic(),
                    POINTER_AS_LONG.getOrDefault(b.name(), Set.of()),
                    b.firstVariadic()));
            if (probe.functions().containsKey(b.name())) {
                libc++;
            } else if (rdmacmProbe.functions().containsKey(b.name())) {
                byHand++;
            } else if (b.name().contains(".")) {
                pointers++;
            } else {
                exported++;
            }
        }
        System.out.printf(
                "FunctionDescriptorConformanceTest: %d hand-written descriptors compared "
                        + "(%d exported verbs with jextract's, %d function pointers with jextract's, %d libc and %d"
                        + " librdmacm with gcc's)%n",
                bindings.size(), exported, pointers, libc, byHand);
        CBoundary.assertNoDifferences("hand-written descriptors", bindings.size(), bad);
        assertTrue(
                exported >= 45 && pointers >= 10 && libc == LIBC.size() && byHand == RDMACM_BY_HAND.size(),
                "fewer bindings than expected: " + exported + " exported, " + pointers + " pointers, " + libc
                        + " libc");
    }

    @Test
    void everyAllowanceNamesABinding() {
        for (String name : POINTER_AS_LONG.keySet()) {
            assertTrue(
                    bindings.stream().anyMatch(b -> b.name().equals(name)),
                    "POINTER_AS_LONG names " + name + ", which no hand-written binding links");
        }
        for (Prototype p : LIBC) {
            assertTrue(
                    bindings.stream().anyMatch(b -> b.name().equals(p.name())),
                    "LIBC names " + p.name() + ", which no hand-written binding links");
        }
    }

    /** The handle was linked from the recorded descriptor, with the recorded options showing in its type. */
    @Test
    void everyHandleHasTheTypeItsDescriptorAndOptionsGive() {
        for (NativeBinding b : bindings) {
            if (b.handle() == null) {
                continue; // an optional symbol this libibverbs lacks
            }
            MethodType t = b.descriptor().toMethodType();
            if (b.capturesErrno()) {
                t = t.insertParameterTypes(0, MemorySegment.class);
            }
            if (b.name().contains(".")) {
                t = t.insertParameterTypes(0, MemorySegment.class); // the function pointer
            }
            assertEquals(t, b.handle().type(), b.name());
        }
    }

    @Test
    void onlyTheDataPathIsCriticalAndItCapturesNoErrno() {
        for (NativeBinding b : bindings) {
            if (b.critical()) {
                assertTrue(MAY_BE_CRITICAL.contains(b.name()), b.name() + " is linked critical: it may block");
                assertTrue(!b.capturesErrno(), b.name() + ": a data-path op returns its own error");
            }
        }
        assertTrue(bindings.stream().anyMatch(NativeBinding::critical), "no critical binding: did InlineVerbs change?");
    }

    /** InlineVerbs.postSrqRecv calls ops.post_srq_recv through POST_RECV: the two C types must agree. */
    @Test
    void postSrqRecvHasPostRecvsType() throws Exception {
        FunctionDescriptor recv = reference("ibv_context_ops.post_recv").descriptor();
        FunctionDescriptor srq = reference("ibv_context_ops.post_srq_recv").descriptor();
        assertTrue(
                CBoundary.compare("post_srq_recv", recv, srq, false, Set.of(), -1)
                        .isEmpty(),
                "post_srq_recv " + srq + " vs post_recv " + recv);
    }

    /** Every static MethodHandle of the hand-written classes is a recorded binding: none is linked elsewhere. */
    @Test
    void everyHandleIsLinkedThroughNativeBinding() throws Exception {
        List<String> stray = new ArrayList<>();
        int seen = 0;
        for (Class<?> k : List.of(
                LibIbverbs.class,
                InlineVerbs.class,
                LibC.class,
                Errno.class,
                NativeLibraries.class,
                Failures.class,
                Class.forName("org.verbs4j.natives.Errno$StrError"),
                LibRdmacm.class)) {
            for (Field f : k.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) && f.getType() == MethodHandle.class) {
                    f.setAccessible(true);
                    Object h = f.get(null);
                    seen++;
                    if (h != null && bindings.stream().noneMatch(b -> b.handle() == h)) {
                        stray.add(k.getSimpleName() + "." + f.getName());
                    }
                }
            }
        }
        assertTrue(stray.isEmpty(), "handles not linked through NativeBinding (so not compared): " + stray);
        assertTrue(seen >= 55, "saw only " + seen + " handles");
    }

    /** Source check: in verbs-native's hand-written code only NativeBinding calls downcallHandle. */
    @Test
    void noDowncallIsLinkedOutsideNativeBinding() throws IOException {
        Path root = Path.of("src/main/java/org/verbs4j/natives");
        assertTrue(Files.isDirectory(root), "run from the verbs-native module folder: " + root.toAbsolutePath());
        List<String> offenders = new ArrayList<>();
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.filter(
                            f -> f.toString().endsWith(".java") && !f.toString().contains("/generated/"))
                    .toList()) {
                if (!p.getFileName().toString().equals("NativeBinding.java")
                        && Files.readString(p).contains("downcallHandle(")) {
                    offenders.add(root.relativize(p).toString());
                }
            }
        }
        assertTrue(
                offenders.isEmpty(),
                "link downcalls through NativeBinding, so that the conformance test sees them: " + offenders);
    }

    /** LibRdmacm's hand-written constants, each compared with jextract's value of the C name it carries. */
    @Test
    void rdmacmConstantsMatchJextract() throws Exception {
        Map<String, String> cName = new LinkedHashMap<>();
        for (String n : List.of(
                "RDMA_PS_TCP",
                "RDMA_PS_UDP",
                "RDMA_OPTION_ID",
                "RDMA_OPTION_ID_REUSEADDR",
                "RDMA_OPTION_ID_ACK_TIMEOUT",
                "RAI_PASSIVE",
                "RAI_NUMERICHOST")) {
            cName.put(n, n);
        }
        List<String> bad = new ArrayList<>();
        int seen = 0;
        for (Field f : LibRdmacm.class.getDeclaredFields()) {
            int m = f.getModifiers();
            if (!Modifier.isStatic(m) || !Modifier.isFinal(m) || f.getType() != int.class) {
                continue;
            }
            seen++;
            String c = cName.get(f.getName());
            if (c == null) {
                bad.add("LibRdmacm." + f.getName() + ": no C name in rdmacmConstantsMatchJextract");
                continue;
            }
            long generated = ((Number) rdmacm_h.class.getMethod(c).invoke(null)).longValue();
            if (f.getInt(null) != generated) {
                bad.add("LibRdmacm." + f.getName() + ": Java " + f.getInt(null) + ", C " + generated);
            }
        }
        CBoundary.assertNoDifferences("LibRdmacm constants", cName.size(), bad);
        assertEquals(cName.size(), seen, "LibRdmacm's constants and the table differ in number");
    }

    @Test
    void libcConstantsMatchGcc() throws IllegalAccessException {
        List<String> bad = new ArrayList<>();
        int seen = 0;
        for (Field f : LibC.class.getDeclaredFields()) {
            int m = f.getModifiers();
            if (!Modifier.isStatic(m)
                    || !Modifier.isFinal(m)
                    || !(f.getType() == int.class || f.getType() == short.class)) {
                continue;
            }
            seen++;
            if (NOT_C.contains(f.getName())) {
                continue;
            }
            if (!LIBC_CONSTANTS.contains(f.getName())) {
                bad.add("LibC." + f.getName()
                        + ": no C expression in LIBC_CONSTANTS (add one, or to NOT_C with a reason)");
                continue;
            }
            f.setAccessible(true);
            long java = ((Number) f.get(null)).longValue();
            long c = probe.constants().get(f.getName());
            if (java != c) {
                bad.add("LibC." + f.getName() + ": Java " + java + ", C " + c);
            }
        }
        CBoundary.assertNoDifferences("LibC constants", LIBC_CONSTANTS.size(), bad);
        assertEquals(LIBC_CONSTANTS.size() + NOT_C.size(), seen, "LibC's constants and the tables differ in number");
        assertEquals(
                LibC.O_NONBLOCK, probe.constants().get("EFD_NONBLOCK"), "LibC documents O_NONBLOCK == EFD_NONBLOCK");
    }
}
