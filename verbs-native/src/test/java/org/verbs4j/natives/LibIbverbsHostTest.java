package org.verbs4j.natives;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.NativeToolchain;

/**
 * The exported libibverbs on a host without an RDMA device: device discovery fails (or, with a
 * device, lists it) exactly as the C library does; the description strings come from
 * libibverbs itself; {@link NativeCallException} messages carry verb, errno name, number, strerror
 * text and hint; a library override that points nowhere is reported with its cause.
 */
class LibIbverbsHostTest {
    /** What C says, keyed by e.g. {@code wc.12}, {@code strerror.38}, {@code devlist.null}. */
    private static Map<String, String> c;

    @BeforeAll
    static void reference() {
        NativeToolchain.requireToolchain();
        String src = """
                #include <errno.h>
                #include <stdio.h>
                #include <string.h>
                #include <infiniband/verbs.h>
                int main(void) {
                    for (int i = 0; i <= 24; i++) printf("wc.%d %s\\n", i, ibv_wc_status_str((enum ibv_wc_status)i));
                    for (int i = 0; i <= 20; i++) printf("event.%d %s\\n", i, ibv_event_type_str((enum ibv_event_type)i));
                    for (int i = -1; i <= 7; i++) printf("node.%d %s\\n", i, ibv_node_type_str((enum ibv_node_type)i));
                    for (int i = 0; i <= 6; i++) printf("port.%d %s\\n", i, ibv_port_state_str((enum ibv_port_state)i));
                    int errs[] = {EPERM, ENOENT, ENOMEM, EINVAL, ENOSYS, EOPNOTSUPP, EAGAIN, ETIMEDOUT};
                    for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) printf("strerror.%d %s\\n", errs[i], strerror(errs[i]));
                    int num = -7;
                    errno = 0;
                    struct ibv_device **list = ibv_get_device_list(&num);
                    int e = errno;
                    printf("devlist.null %d\\n", list == NULL);
                    printf("devlist.errno %d\\n", list == NULL ? e : 0);
                    printf("devlist.num %d\\n", num);
                    if (list) ibv_free_device_list(list);
                    return 0;
                }
                """;
        Path exe = NativeToolchain.compileExecutable("ibverbs_reference", src, "-libverbs");
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : NativeToolchain.run(exe).split("\n")) {
            if (!line.isBlank()) {
                String[] kv = line.split(" ", 2);
                m.put(kv[0], kv.length > 1 ? kv[1] : "");
            }
        }
        c = m;
    }

    @Test
    void libibverbsLoadsOnThisHost() {
        assertTrue(
                NativeLibraries.ibverbs().isPresent(),
                () -> NativeLibraries.ibverbsUnavailabilityCause().orElse(""));
        assertTrue(NativeLibraries.ibverbsUnavailabilityCause().isEmpty());
        assertTrue(NativeLibraries.ibverbsOrThrow().find("ibv_get_device_list").isPresent());
    }

    @Test
    void getDeviceListBehavesAsTheCLibrary() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment num = arena.allocate(JAVA_INT);
            num.set(JAVA_INT, 0, -7);
            if (c.get("devlist.null").equals("1")) {
                NativeCallException e = assertThrows(NativeCallException.class, () -> LibIbverbs.getDeviceList(num));
                int errno = Integer.parseInt(c.get("devlist.errno"));
                assertEquals("ibv_get_device_list", e.verb());
                assertEquals(errno, e.errno(), "errno captured at the call");
                assertTrue(e.getMessage().startsWith("ibv_get_device_list failed: "), e.getMessage());
                assertTrue(
                        e.getMessage()
                                .contains(Errno.name(errno) + " (errno " + errno + ", " + c.get("strerror." + errno)),
                        e.getMessage());
                if (!new File("/sys/class/infiniband").isDirectory()) {
                    // this host: no RDMA subsystem at all
                    assertEquals(Errno.ENOSYS, e.errno());
                    assertEquals("ENOSYS", e.errnoName());
                    assertTrue(e.getMessage().contains("ENOSYS (errno 38, Function not implemented)"), e.getMessage());
                }
            } else {
                MemorySegment list = LibIbverbs.getDeviceList(num);
                try {
                    assertEquals(Integer.parseInt(c.get("devlist.num")), num.get(JAVA_INT, 0));
                    MemorySegment arr = list.reinterpret(8L * (num.get(JAVA_INT, 0) + 1));
                    for (int i = 0; i < num.get(JAVA_INT, 0); i++) {
                        MemorySegment dev = arr.getAtIndex(java.lang.foreign.ValueLayout.ADDRESS, i);
                        assertFalse(LibIbverbs.getDeviceName(dev).isEmpty());
                    }
                    assertEquals(
                            0,
                            arr.getAtIndex(java.lang.foreign.ValueLayout.ADDRESS, num.get(JAVA_INT, 0))
                                    .address(),
                            "the list is NULL-terminated");
                } finally {
                    LibIbverbs.freeDeviceList(list);
                }
            }
        }
    }

    @Test
    void descriptionStringsComeFromLibibverbs() {
        assertEquals("success", LibIbverbs.wcStatusStr(0));
        assertEquals("transport retry counter exceeded", LibIbverbs.wcStatusStr(12));
        assertEquals("RNR retry counter exceeded", LibIbverbs.wcStatusStr(13));
        assertEquals("Work Request Flushed Error", LibIbverbs.wcStatusStr(5));
        assertEquals("port active", LibIbverbs.eventTypeStr(9));
        assertEquals("InfiniBand channel adapter", LibIbverbs.nodeTypeStr(1));
        assertEquals("active", LibIbverbs.portStateStr(4));
        int compared = 0;
        for (Map.Entry<String, String> e : c.entrySet()) {
            String[] k = e.getKey().split("\\.");
            String java = switch (k[0]) {
                case "wc" -> LibIbverbs.wcStatusStr(Integer.parseInt(k[1]));
                case "event" -> LibIbverbs.eventTypeStr(Integer.parseInt(k[1]));
                case "node" -> LibIbverbs.nodeTypeStr(Integer.parseInt(k[1]));
                case "port" -> LibIbverbs.portStateStr(Integer.parseInt(k[1]));
                default -> null;
            };
            if (java != null) {
                assertEquals(e.getValue(), java, e.getKey());
                compared++;
            }
        }
        assertEquals(25 + 21 + 9 + 7, compared);
    }

    @Test
    void errnoDescribeIsStrerror() {
        for (int e : new int[] {
            Errno.EPERM,
            Errno.ENOENT,
            Errno.ENOMEM,
            Errno.EINVAL,
            Errno.ENOSYS,
            Errno.EOPNOTSUPP,
            Errno.EAGAIN,
            Errno.ETIMEDOUT
        }) {
            assertEquals(c.get("strerror." + e), Errno.describe(e), "strerror(" + e + ")");
        }
        assertEquals("errno 4242", Errno.name(4242));
    }

    @Test
    void verbsExceptionMessageForRegMrEnomemExplainsMemlock() {
        NativeCallException e = (NativeCallException) Failures.of("ibv_reg_mr", Errno.ENOMEM);
        String m = e.getMessage();
        assertEquals("ibv_reg_mr", e.verb());
        assertEquals(12, e.errno());
        assertEquals("ENOMEM", e.errnoName());
        assertTrue(m.startsWith("ibv_reg_mr failed: ENOMEM (errno 12, " + c.get("strerror.12") + ")"), m);
        assertTrue(m.contains("ulimit -l"), m);
        assertTrue(m.contains("memlock"), m);
        assertTrue(m.contains("Hint: ") && e.hint() != null && m.endsWith(e.hint()), m);
    }

    @Test
    void verbsExceptionMessageForModifyQpEinvalNamesTheAttributeMask() {
        NativeCallException e = (NativeCallException) Failures.of("ibv_modify_qp", Errno.EINVAL, "RTR->RTS");
        String m = e.getMessage();
        assertTrue(m.startsWith("ibv_modify_qp failed: EINVAL (errno 22, " + c.get("strerror.22") + "): RTR->RTS"), m);
        assertTrue(m.contains("attribute mask"), m);
        assertEquals(Errno.EINVAL, e.errno());
    }

    @Test
    void verbsExceptionWithoutAKnownHint() {
        NativeCallException e = (NativeCallException) Failures.of("ibv_get_device_list", Errno.ENOSYS);
        assertNull(e.hint());
        assertEquals("ibv_get_device_list failed: ENOSYS (errno 38, " + c.get("strerror.38") + ")", e.getMessage());
        NativeCallException explicit = new NativeCallException("ibv_alloc_pd", 0, "no errno", "do this");
        assertEquals("ibv_alloc_pd failed: no errno. Hint: do this", explicit.getMessage());
        assertEquals("do this", explicit.hint());
        assertThrows(NullPointerException.class, () -> new NativeCallException(null, 1, null, null));
    }

    @Test
    void checkRcAndCheckPtrUseTheReturnedOrCapturedErrno() {
        MemorySegment cap = Errno.captureSegment();
        LibIbverbs.checkRc("ibv_dealloc_pd", 0, cap); // no throw
        NativeCallException positive =
                assertThrows(NativeCallException.class, () -> LibIbverbs.checkRc("ibv_dealloc_pd", Errno.EBUSY, cap));
        assertEquals(Errno.EBUSY, positive.errno());
        assertEquals("ibv_dealloc_pd", positive.verb());

        VarHandle errno = Errno.CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
        errno.set(cap, 0L, Errno.EAGAIN);
        assertEquals(Errno.EAGAIN, Errno.captured(cap));
        NativeCallException negative =
                assertThrows(NativeCallException.class, () -> LibIbverbs.checkRc("ibv_destroy_qp", -1, cap));
        assertEquals(Errno.EAGAIN, negative.errno(), "a negative return falls back to the captured errno");
        NativeCallException ptr = assertThrows(
                NativeCallException.class, () -> LibIbverbs.checkPtr("ibv_alloc_pd", MemorySegment.NULL, cap));
        assertEquals(Errno.EAGAIN, ptr.errno());

        MemorySegment clean = Errno.captureSegment();
        assertEquals(0, Errno.captured(clean), "captureSegment() clears errno");
        NativeCallException noErrno = assertThrows(
                NativeCallException.class, () -> LibIbverbs.checkPtr("ibv_alloc_pd", MemorySegment.NULL, clean));
        assertEquals(Errno.EINVAL, noErrno.errno());
        assertTrue(noErrno.getMessage().contains("returned NULL without setting errno"), noErrno.getMessage());
        MemorySegment ok = MemorySegment.ofAddress(0x1000);
        assertEquals(ok, LibIbverbs.checkPtr("ibv_alloc_pd", ok, clean));
    }

    // ---- NativeLibraries in a forked JVM ---------------------------------------------------------

    /** Entry point of the forked JVM: prints what NativeLibraries reports, one {@code key=value} a line. */
    public static final class ForkedMain {
        public static void main(String[] args) {
            System.out.println("ibverbs.present=" + NativeLibraries.ibverbs().isPresent());
            System.out.println("ibverbs.cause="
                    + NativeLibraries.ibverbsUnavailabilityCause().orElse("<none>"));
            System.out.println("rdmacm.present=" + NativeLibraries.rdmacm().isPresent());
            System.out.println("rdmacm.cause="
                    + NativeLibraries.rdmacmUnavailabilityCause().orElse("<none>"));
            try {
                NativeLibraries.ibverbsOrThrow();
                System.out.println("orThrow=returned");
            } catch (NativeCallException e) {
                System.out.println("orThrow.verb=" + e.verb());
                System.out.println("orThrow.errno=" + e.errno());
                System.out.println("orThrow.message=" + e.getMessage().replace('\n', ' '));
            } catch (Throwable t) {
                System.out.println("orThrow.unexpected=" + t);
            }
            try {
                Class.forName("org.verbs4j.natives.LibIbverbs");
                System.out.println("LibIbverbs=initialised");
            } catch (ExceptionInInitializerError e) {
                System.out.println("LibIbverbs.cause=" + e.getCause().getClass().getSimpleName() + ": "
                        + e.getCause().getMessage());
            } catch (Throwable t) {
                System.out.println("LibIbverbs.unexpected=" + t);
            }
        }
    }

    private static Map<String, String> fork(List<String> jvmArgs) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(jvmArgs);
        cmd.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(ForkedMain.class.getName());
        NativeToolchain.Result r = NativeToolchain.exec(cmd, 60);
        assertEquals(0, r.exit(), r.output());
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : r.output().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0 && !line.startsWith("WARNING")) {
                m.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return m;
    }

    @Test
    void overrideThatPointsNowhereIsReportedWithItsCause() throws Exception {
        String lib = "/nonexistent/verbs4j-test/libibverbs-nope.so.1";
        String cm = "/nonexistent/verbs4j-test/librdmacm-nope.so.1";
        Map<String, String> out = fork(List.of(
                "--enable-native-access=ALL-UNNAMED",
                "-D" + NativeLibraries.IBVERBS_PROPERTY + "=" + lib,
                "-D" + NativeLibraries.RDMACM_PROPERTY + "=" + cm));
        assertEquals("false", out.get("ibverbs.present"), out.toString());
        String cause = out.get("ibverbs.cause");
        assertTrue(cause.contains(lib), cause);
        assertTrue(cause.contains("could not be loaded"), cause);
        assertTrue(cause.contains("-D" + NativeLibraries.IBVERBS_PROPERTY + "="), cause);
        assertTrue(cause.contains("libibverbs1"), "says what to install: " + cause);
        assertEquals("false", out.get("rdmacm.present"));
        assertTrue(out.get("rdmacm.cause").contains(cm), out.get("rdmacm.cause"));
        assertEquals("dlopen(" + lib + ")", out.get("orThrow.verb"), out.toString());
        assertEquals(String.valueOf(Errno.ENOENT), out.get("orThrow.errno"));
        assertTrue(out.get("orThrow.message").contains(cause), out.get("orThrow.message"));
        assertTrue(out.get("LibIbverbs.cause").startsWith("NativeCallException: dlopen(" + lib + ")"), out.toString());
    }

    @Test
    void theDefaultLibraryLoadsInAForkedJvmToo() throws Exception {
        Map<String, String> out = fork(List.of("--enable-native-access=ALL-UNNAMED"));
        assertEquals("true", out.get("ibverbs.present"), out.toString());
        assertEquals("<none>", out.get("ibverbs.cause"));
        assertEquals("returned", out.get("orThrow"));
        assertEquals("initialised", out.get("LibIbverbs"));
    }

    @Test
    void deniedNativeAccessIsReportedAsSuch() throws Exception {
        Map<String, String> out = fork(List.of("--illegal-native-access=deny"));
        assertEquals("false", out.get("ibverbs.present"), out.toString());
        assertTrue(out.get("ibverbs.cause").startsWith("native access is not enabled for verbs4j"), out.toString());
        assertTrue(out.get("ibverbs.cause").contains("--enable-native-access"), out.toString());
        assertEquals("false", out.get("rdmacm.present"), out.toString());
    }

    /**
     * With native access denied, ibverbsOrThrow() throws the NativeCallException carrying the cause
     * (building its message must not need native access: Errno links strerror lazily).
     */
    @Test
    void deniedNativeAccessOrThrowGivesTheNativeCallException() throws Exception {
        Map<String, String> out = fork(List.of("--illegal-native-access=deny"));
        assertEquals("dlopen(libibverbs.so.1)", out.get("orThrow.verb"), out.toString());
        assertTrue(out.get("orThrow.message").contains("--enable-native-access"), out.toString());
    }
}
