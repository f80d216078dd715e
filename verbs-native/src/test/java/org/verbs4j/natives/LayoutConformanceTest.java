package org.verbs4j.natives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.JarURLConnection;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.NativeToolchain;

/**
 * Proves, against gcc and the installed {@code <infiniband/verbs.h>} / {@code <rdma/rdma_cma.h>},
 * that every hand-placed offset constant, every jextract-generated struct/union (size, alignment,
 * and the offset and size of every named member, recursively) and every generated integer
 * constant has the value the C compiler gives it.
 *
 * <p>The C probe is generated from the Java side (one {@code printf} per item), so the set of
 * checked items follows the generated code automatically.
 */
class LayoutConformanceTest {
    private static final String GENERATED = "org.verbs4j.natives.generated.";
    private static final List<String> PACKAGES = List.of("ibverbs", "rdmacm");

    /** One value to compare: its key, the C expression (printed as long long) and Java's value. */
    record Item(String key, String cExpr, long javaValue, boolean int32) {}

    private static List<Item> handWritten;
    private static List<Item> generatedLayouts;
    private static List<Item> constants;
    private static List<Item> errnos;
    private static Map<String, Long> cValues;

    // ---- the table of hand-written constants ---------------------------------------------

    private static final Map<String, String> TABLE = new LinkedHashMap<>();

    private static void t(Class<?> c, String field, String cExpr) {
        if (TABLE.put(c.getSimpleName() + "." + field, cExpr) != null) {
            throw new IllegalStateException("duplicate " + field);
        }
    }

    private static String off(String type, String member) {
        return "offsetof(" + type + ", " + member + ")";
    }

    static {
        String ctx = "struct ibv_context", vctx = "struct verbs_context";
        Class<?> c = ContextLayout.class;
        t(c, "SIZE", "sizeof(struct ibv_context)");
        t(c, "DEVICE", off(ctx, "device"));
        t(c, "OPS", off(ctx, "ops"));
        t(c, "OPS_ALLOC_MW", off(ctx, "ops.alloc_mw"));
        t(c, "OPS_BIND_MW", off(ctx, "ops.bind_mw"));
        t(c, "OPS_DEALLOC_MW", off(ctx, "ops.dealloc_mw"));
        t(c, "OPS_POLL_CQ", off(ctx, "ops.poll_cq"));
        t(c, "OPS_REQ_NOTIFY_CQ", off(ctx, "ops.req_notify_cq"));
        t(c, "OPS_POST_SRQ_RECV", off(ctx, "ops.post_srq_recv"));
        t(c, "OPS_POST_SEND", off(ctx, "ops.post_send"));
        t(c, "OPS_POST_RECV", off(ctx, "ops.post_recv"));
        t(c, "CMD_FD", off(ctx, "cmd_fd"));
        t(c, "ASYNC_FD", off(ctx, "async_fd"));
        t(c, "NUM_COMP_VECTORS", off(ctx, "num_comp_vectors"));
        t(c, "ABI_COMPAT", off(ctx, "abi_compat"));
        t(c, "ABI_IS_EXTENDED", "(intptr_t)__VERBS_ABI_IS_EXTENDED");
        t(c, "VERBS_CONTEXT_SIZE", "sizeof(struct verbs_context)");
        t(c, "VERBS_CONTEXT_CONTEXT", off(vctx, "context"));
        t(c, "VCTX_QUERY_PORT", off(vctx, "query_port"));
        t(c, "VCTX_ADVISE_MR", off(vctx, "advise_mr"));
        t(c, "VCTX_CREATE_CQ_EX", off(vctx, "create_cq_ex"));
        t(c, "VCTX_QUERY_DEVICE_EX", off(vctx, "query_device_ex"));
        t(c, "VCTX_CREATE_QP_EX", off(vctx, "create_qp_ex"));
        t(c, "VCTX_SZ", off(vctx, "sz"));
        // struct verbs_device (driver.h, not installed) starts with the ibv_device, then the ops pointer
        t(
                c,
                "VERBS_DEVICE_OPS",
                "((sizeof(struct ibv_device) + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *))");
        t(c, "PORT_ATTR_SIZE", "sizeof(struct ibv_port_attr)");
        // the compat ibv_query_port@IBVERBS_1.1 fills everything before port_cap_flags2
        t(c, "COMPAT_PORT_ATTR_SIZE", off("struct ibv_port_attr", "port_cap_flags2"));

        String swr = "struct ibv_send_wr", rwr = "struct ibv_recv_wr", sge = "struct ibv_sge";
        c = WorkRequestLayout.class;
        t(c, "SEND_WR_SIZE", "sizeof(struct ibv_send_wr)");
        t(c, "SEND_WR_ID", off(swr, "wr_id"));
        t(c, "SEND_NEXT", off(swr, "next"));
        t(c, "SEND_SG_LIST", off(swr, "sg_list"));
        t(c, "SEND_NUM_SGE", off(swr, "num_sge"));
        t(c, "SEND_OPCODE", off(swr, "opcode"));
        t(c, "SEND_FLAGS", off(swr, "send_flags"));
        t(c, "SEND_IMM_DATA", off(swr, "imm_data"));
        t(c, "SEND_RDMA_REMOTE_ADDR", off(swr, "wr.rdma.remote_addr"));
        t(c, "SEND_RDMA_RKEY", off(swr, "wr.rdma.rkey"));
        t(c, "SEND_ATOMIC_REMOTE_ADDR", off(swr, "wr.atomic.remote_addr"));
        t(c, "SEND_ATOMIC_COMPARE_ADD", off(swr, "wr.atomic.compare_add"));
        t(c, "SEND_ATOMIC_SWAP", off(swr, "wr.atomic.swap"));
        t(c, "SEND_ATOMIC_RKEY", off(swr, "wr.atomic.rkey"));
        t(c, "SEND_UD_AH", off(swr, "wr.ud.ah"));
        t(c, "SEND_UD_REMOTE_QPN", off(swr, "wr.ud.remote_qpn"));
        t(c, "SEND_UD_REMOTE_QKEY", off(swr, "wr.ud.remote_qkey"));
        t(c, "SEND_XRC_REMOTE_SRQN", off(swr, "qp_type.xrc.remote_srqn"));
        t(c, "RECV_WR_SIZE", "sizeof(struct ibv_recv_wr)");
        t(c, "RECV_WR_ID", off(rwr, "wr_id"));
        t(c, "RECV_NEXT", off(rwr, "next"));
        t(c, "RECV_SG_LIST", off(rwr, "sg_list"));
        t(c, "RECV_NUM_SGE", off(rwr, "num_sge"));
        t(c, "SGE_SIZE", "sizeof(struct ibv_sge)");
        t(c, "SGE_ADDR", off(sge, "addr"));
        t(c, "SGE_LENGTH", off(sge, "length"));
        t(c, "SGE_LKEY", off(sge, "lkey"));

        String wc = "struct ibv_wc";
        c = CompletionLayout.class;
        t(c, "WC_SIZE", "sizeof(struct ibv_wc)");
        t(c, "WR_ID", off(wc, "wr_id"));
        t(c, "STATUS", off(wc, "status"));
        t(c, "OPCODE", off(wc, "opcode"));
        t(c, "VENDOR_ERR", off(wc, "vendor_err"));
        t(c, "BYTE_LEN", off(wc, "byte_len"));
        t(c, "IMM_DATA", off(wc, "imm_data"));
        t(c, "QP_NUM", off(wc, "qp_num"));
        t(c, "SRC_QP", off(wc, "src_qp"));
        t(c, "WC_FLAGS", off(wc, "wc_flags"));
        t(c, "PKEY_INDEX", off(wc, "pkey_index"));
        t(c, "SLID", off(wc, "slid"));
        t(c, "SL", off(wc, "sl"));
        t(c, "DLID_PATH_BITS", off(wc, "dlid_path_bits"));

        c = ObjectLayout.class;
        t(c, "QP_SIZE", "sizeof(struct ibv_qp)");
        t(c, "QP_CONTEXT", off("struct ibv_qp", "context"));
        t(c, "QP_QP_NUM", off("struct ibv_qp", "qp_num"));
        t(c, "QP_STATE", off("struct ibv_qp", "state"));
        t(c, "QP_QP_TYPE", off("struct ibv_qp", "qp_type"));
        t(c, "CQ_SIZE", "sizeof(struct ibv_cq)");
        t(c, "CQ_CONTEXT", off("struct ibv_cq", "context"));
        t(c, "CQ_CHANNEL", off("struct ibv_cq", "channel"));
        t(c, "CQ_CQE", off("struct ibv_cq", "cqe"));
        t(c, "SRQ_CONTEXT", off("struct ibv_srq", "context"));
        t(c, "MR_SIZE", "sizeof(struct ibv_mr)");
        t(c, "MR_ADDR", off("struct ibv_mr", "addr"));
        t(c, "MR_LENGTH", off("struct ibv_mr", "length"));
        t(c, "MR_LKEY", off("struct ibv_mr", "lkey"));
        t(c, "MR_RKEY", off("struct ibv_mr", "rkey"));
        t(c, "PD_CONTEXT", off("struct ibv_pd", "context"));
        t(c, "PD_HANDLE", off("struct ibv_pd", "handle"));
        t(c, "DEVICE_NODE_TYPE", off("struct ibv_device", "node_type"));
        t(c, "DEVICE_TRANSPORT_TYPE", off("struct ibv_device", "transport_type"));
        t(c, "DEVICE_NAME", off("struct ibv_device", "name"));
        t(c, "COMP_CHANNEL_FD", off("struct ibv_comp_channel", "fd"));

        t(InlineVerbs.class, "ACCESS_OPTIONAL_RANGE", "IBV_ACCESS_OPTIONAL_RANGE");
        String cqx = "struct ibv_cq_ex", cia = "struct ibv_cq_init_attr_ex", dax = "struct ibv_device_attr_ex";
        c = CompletionExLayout.class;
        t(c, "CQ_EX_SIZE", "sizeof(struct ibv_cq_ex)");
        for (String m : new String[] {
            "status",
            "wr_id",
            "start_poll",
            "next_poll",
            "end_poll",
            "read_opcode",
            "read_vendor_err",
            "read_byte_len",
            "read_imm_data",
            "read_qp_num",
            "read_src_qp",
            "read_wc_flags",
            "read_slid",
            "read_sl",
            "read_dlid_path_bits",
            "read_completion_ts",
            "read_cvlan",
            "read_flow_tag",
            "read_completion_wallclock_ns"
        }) {
            t(c, m.toUpperCase(java.util.Locale.ROOT), off(cqx, m));
        }
        t(c, "INIT_SIZE", "sizeof(struct ibv_cq_init_attr_ex)");
        for (String m : new String[] {
            "cqe", "cq_context", "channel", "comp_vector", "wc_flags", "comp_mask", "flags", "parent_domain"
        }) {
            t(c, "INIT_" + m.toUpperCase(java.util.Locale.ROOT), off(cia, m));
        }
        t(c, "INIT_ATTR_MASK_PD", "IBV_CQ_INIT_ATTR_MASK_PD");
        t(c, "POLL_ATTR_SIZE", "sizeof(struct ibv_poll_cq_attr)");
        t(c, "VALUES_SIZE", "sizeof(struct ibv_values_ex)");
        t(c, "VALUES_COMP_MASK", off("struct ibv_values_ex", "comp_mask"));
        t(c, "VALUES_RAW_CLOCK_SEC", off("struct ibv_values_ex", "raw_clock.tv_sec"));
        t(c, "VALUES_RAW_CLOCK_NSEC", off("struct ibv_values_ex", "raw_clock.tv_nsec"));
        t(c, "VALUES_MASK_RAW_CLOCK", "IBV_VALUES_MASK_RAW_CLOCK");
        t(c, "VCTX_QUERY_RT_VALUES", off("struct verbs_context", "query_rt_values"));
        t(c, "DEVICE_ATTR_EX_SIZE", "sizeof(struct ibv_device_attr_ex)");
        t(c, "DEVICE_ATTR_EX_COMPLETION_TIMESTAMP_MASK", off(dax, "completion_timestamp_mask"));
        t(c, "DEVICE_ATTR_EX_HCA_CORE_CLOCK", off(dax, "hca_core_clock"));
        for (String f : new String[] {
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
            "COMPLETION_TIMESTAMP_WALLCLOCK"
        }) {
            t(c, "WC_EX_WITH_" + f, "IBV_WC_EX_WITH_" + f);
        }
        t(c, "CQ_INIT_ATTR_MASK_FLAGS", "IBV_CQ_INIT_ATTR_MASK_FLAGS");

        String qpx = "struct ibv_qp_ex", qia = "struct ibv_qp_init_attr_ex";
        c = QueuePairExLayout.class;
        t(c, "QP_EX_SIZE", "sizeof(struct ibv_qp_ex)");
        for (String m : new String[] {
            "wr_id",
            "wr_flags",
            "wr_atomic_cmp_swp",
            "wr_atomic_fetch_add",
            "wr_bind_mw",
            "wr_local_inv",
            "wr_rdma_read",
            "wr_rdma_write",
            "wr_rdma_write_imm",
            "wr_send",
            "wr_send_imm",
            "wr_send_inv",
            "wr_set_ud_addr",
            "wr_set_xrc_srqn",
            "wr_set_inline_data",
            "wr_set_inline_data_list",
            "wr_set_sge",
            "wr_set_sge_list",
            "wr_start",
            "wr_complete",
            "wr_abort",
            "wr_atomic_write"
        }) {
            t(c, m.toUpperCase(java.util.Locale.ROOT), off(qpx, m));
        }
        t(c, "INIT_EX_SIZE", "sizeof(struct ibv_qp_init_attr_ex)");
        t(c, "INIT_COMP_MASK", off(qia, "comp_mask"));
        t(c, "INIT_PD", off(qia, "pd"));
        t(c, "INIT_SEND_OPS_FLAGS", off(qia, "send_ops_flags"));
        t(c, "INIT_ATTR_PD", "IBV_QP_INIT_ATTR_PD");
        t(c, "INIT_ATTR_SEND_OPS_FLAGS", "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS");
        t(c, "MW_SIZE", "sizeof(struct ibv_mw)");
        t(c, "MW_RKEY", off("struct ibv_mw", "rkey"));
        t(c, "MW_TYPE", off("struct ibv_mw", "type"));
        t(c, "SEND_BIND_MW", off(swr, "bind_mw.mw"));
        t(c, "SEND_BIND_RKEY", off(swr, "bind_mw.rkey"));
        t(c, "SEND_BIND_INFO", off(swr, "bind_mw.bind_info"));
        t(c, "SEND_BIND_MR", off(swr, "bind_mw.bind_info.mr"));
        t(c, "SEND_BIND_ADDR", off(swr, "bind_mw.bind_info.addr"));
        t(c, "SEND_BIND_LENGTH", off(swr, "bind_mw.bind_info.length"));
        t(c, "SEND_BIND_ACCESS", off(swr, "bind_mw.bind_info.mw_access_flags"));
        t(c, "SEND_INVALIDATE_RKEY", off(swr, "invalidate_rkey"));
        t(c, "DATA_BUF_SIZE", "sizeof(struct ibv_data_buf)");
        for (String f : new String[] {
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
            "ATOMIC_WRITE"
        }) {
            t(c, "WITH_" + f, "IBV_QP_EX_WITH_" + f);
        }
        t(c, "MW_TYPE_1", "IBV_MW_TYPE_1");
        t(c, "MW_TYPE_2", "IBV_MW_TYPE_2");

        String pdi = "struct ibv_parent_domain_init_attr";
        c = DomainVerbs.class;
        t(c, "TD_CONTEXT", off("struct ibv_td", "context"));
        t(c, "TD_INIT_ATTR_SIZE", "sizeof(struct ibv_td_init_attr)");
        t(c, "PARENT_DOMAIN_INIT_ATTR_SIZE", "sizeof(" + pdi + ")");
        t(c, "PARENT_DOMAIN_PD", off(pdi, "pd"));
        t(c, "PARENT_DOMAIN_TD", off(pdi, "td"));

        c = DeviceMemoryVerbs.class;
        t(c, "ALLOC_DM_ATTR_SIZE", "sizeof(struct ibv_alloc_dm_attr)");
        t(c, "ALLOC_DM_LENGTH", off("struct ibv_alloc_dm_attr", "length"));
        t(c, "DM_SIZE", "sizeof(struct ibv_dm)");
        t(c, "DM_CONTEXT", off("struct ibv_dm", "context"));
        t(c, "DM_MEMCPY_TO_DM", off("struct ibv_dm", "memcpy_to_dm"));
        t(c, "DM_MEMCPY_FROM_DM", off("struct ibv_dm", "memcpy_from_dm"));
        t(c, "ACCESS_ZERO_BASED", "IBV_ACCESS_ZERO_BASED");

        String xi = "struct ibv_xrcd_init_attr", si = "struct ibv_srq_init_attr_ex";
        c = XrcVerbs.class;
        t(c, "XRCD_SIZE", "sizeof(struct ibv_xrcd)");
        t(c, "XRCD_CONTEXT", off("struct ibv_xrcd", "context"));
        t(c, "XRCD_INIT_ATTR_SIZE", "sizeof(" + xi + ")");
        t(c, "XRCD_INIT_COMP_MASK", off(xi, "comp_mask"));
        t(c, "XRCD_INIT_FD", off(xi, "fd"));
        t(c, "XRCD_INIT_OFLAGS", off(xi, "oflags"));
        t(c, "XRCD_INIT_ATTR_FD", "IBV_XRCD_INIT_ATTR_FD");
        t(c, "XRCD_INIT_ATTR_OFLAGS", "IBV_XRCD_INIT_ATTR_OFLAGS");
        t(c, "SRQ_INIT_EX_SIZE", "sizeof(" + si + ")");
        t(c, "SRQ_INIT_EX_MAX_WR", off(si, "attr.max_wr"));
        t(c, "SRQ_INIT_EX_MAX_SGE", off(si, "attr.max_sge"));
        t(c, "SRQ_INIT_EX_COMP_MASK", off(si, "comp_mask"));
        t(c, "SRQ_INIT_EX_TYPE", off(si, "srq_type"));
        t(c, "SRQ_INIT_EX_PD", off(si, "pd"));
        t(c, "SRQ_INIT_EX_XRCD", off(si, "xrcd"));
        t(c, "SRQ_INIT_EX_CQ", off(si, "cq"));
        t(c, "SRQ_INIT_ATTR_TYPE", "IBV_SRQ_INIT_ATTR_TYPE");
        t(c, "SRQ_INIT_ATTR_PD", "IBV_SRQ_INIT_ATTR_PD");
        t(c, "SRQ_INIT_ATTR_XRCD", "IBV_SRQ_INIT_ATTR_XRCD");
        t(c, "SRQ_INIT_ATTR_CQ", "IBV_SRQ_INIT_ATTR_CQ");
        t(c, "SRQT_XRC", "IBV_SRQT_XRC");
        t(c, "QP_INIT_QP_TYPE", off("struct ibv_qp_init_attr_ex", "qp_type"));
        t(c, "QP_INIT_XRCD", off("struct ibv_qp_init_attr_ex", "xrcd"));
        t(c, "QP_INIT_ATTR_XRCD", "IBV_QP_INIT_ATTR_XRCD");
        t(c, "QPT_XRC_SEND", "IBV_QPT_XRC_SEND");
        t(c, "QPT_XRC_RECV", "IBV_QPT_XRC_RECV");
        t(c, "QP_OPEN_ATTR_SIZE", "sizeof(struct ibv_qp_open_attr)");
        t(c, "QP_OPEN_COMP_MASK", off("struct ibv_qp_open_attr", "comp_mask"));
        t(c, "QP_OPEN_QP_NUM", off("struct ibv_qp_open_attr", "qp_num"));
        t(c, "QP_OPEN_XRCD", off("struct ibv_qp_open_attr", "xrcd"));
        t(c, "QP_OPEN_QP_TYPE", off("struct ibv_qp_open_attr", "qp_type"));
        t(c, "QP_OPEN_ATTR_NUM", "IBV_QP_OPEN_ATTR_NUM");
        t(c, "QP_OPEN_ATTR_XRCD", "IBV_QP_OPEN_ATTR_XRCD");
        t(c, "QP_OPEN_ATTR_TYPE", "IBV_QP_OPEN_ATTR_TYPE");
    }

    /** The classes whose every public static final int/long must be in {@link #TABLE}. */
    private static final List<Class<?>> HAND_WRITTEN = List.of(
            ContextLayout.class,
            WorkRequestLayout.class,
            CompletionLayout.class,
            ObjectLayout.class,
            CompletionExLayout.class,
            QueuePairExLayout.class,
            InlineVerbs.class,
            DomainVerbs.class,
            DeviceMemoryVerbs.class,
            XrcVerbs.class);

    // ---- the probe --------------------------------------------------------------------------

    @BeforeAll
    static void probe() throws Exception {
        NativeToolchain.requireToolchain();
        handWritten = handWrittenItems();
        generatedLayouts = generatedLayoutItems();
        constants = constantItems();
        errnos = errnoItems();

        List<Item> all = new ArrayList<>();
        Stream.of(handWritten, generatedLayouts, constants, errnos).forEach(all::addAll);
        Set<String> keys = new TreeSet<>();
        for (Item i : all) {
            assertTrue(keys.add(i.key()), "duplicate probe key " + i.key());
        }
        StringBuilder c = new StringBuilder("""
                #include <errno.h>
                #include <stddef.h>
                #include <stdint.h>
                #include <stdio.h>
                #include <infiniband/verbs.h>
                #include <rdma/rdma_cma.h>
                int main(void) {
                """);
        for (Item i : all) {
            c.append("    printf(\"%s %lld\\n\", \"")
                    .append(i.key())
                    .append("\", (long long)(")
                    .append(i.cExpr())
                    .append("));\n");
        }
        c.append("    return 0;\n}\n");
        Path exe = NativeToolchain.compileExecutable("layout_probe", c.toString());
        String out = NativeToolchain.run(exe);
        Map<String, Long> values = new LinkedHashMap<>();
        for (String line : out.split("\n")) {
            if (line.isBlank()) {
                continue;
            }
            String[] kv = line.trim().split(" ");
            assertEquals(2, kv.length, "probe line: " + line);
            values.put(kv[0], Long.parseLong(kv[1]));
        }
        cValues = values;
        System.out.printf(
                "LayoutConformanceTest: %d hand-written constants, %d generated layout items, "
                        + "%d generated constants, %d errno constants = %d items compared with gcc%n",
                handWritten.size(), generatedLayouts.size(), constants.size(), errnos.size(), all.size());
    }

    private static void compare(String what, List<Item> items) {
        List<String> bad = new ArrayList<>();
        for (Item i : items) {
            Long c = cValues.get(i.key());
            if (c == null) {
                bad.add(i.key() + ": not printed by the probe");
            } else if (!matches(i, c)) {
                bad.add(i.key() + ": Java " + i.javaValue() + ", C " + c + "   [" + i.cExpr() + "]");
            }
        }
        assertTrue(
                bad.isEmpty(),
                what + ": " + bad.size() + " of " + items.size() + " differ from gcc:\n  " + String.join("\n  ", bad));
    }

    /** A Java int matches a C value that is the same 32 bits, read signed or unsigned. */
    private static boolean matches(Item i, long c) {
        if (!i.int32()) {
            return c == i.javaValue();
        }
        int j = (int) i.javaValue();
        return c == j || c == Integer.toUnsignedLong(j);
    }

    // ---- (a) hand-written constants ------------------------------------------------------

    private static List<Item> handWrittenItems() throws ReflectiveOperationException {
        List<Item> items = new ArrayList<>();
        for (Map.Entry<String, String> e : TABLE.entrySet()) {
            String[] cf = e.getKey().split("\\.");
            Class<?> owner = HAND_WRITTEN.stream()
                    .filter(k -> k.getSimpleName().equals(cf[0]))
                    .findFirst()
                    .orElseThrow();
            Field f = owner.getField(cf[1]); // NoSuchFieldException: the table names a constant that is gone
            long v = f.getType() == int.class ? f.getInt(null) : f.getLong(null);
            items.add(new Item("hand." + e.getKey(), e.getValue(), v, f.getType() == int.class));
        }
        return items;
    }

    @Test
    void everyHandWrittenConstantMatchesGcc() {
        assertTrue(handWritten.size() >= 80, "expected the whole table, got " + handWritten.size());
        compare("hand-written constants", handWritten);
    }

    @Test
    void everyHandWrittenConstantIsInTheTable() {
        List<String> missing = new ArrayList<>();
        int seen = 0;
        for (Class<?> k : HAND_WRITTEN) {
            for (Field f : k.getDeclaredFields()) {
                int m = f.getModifiers();
                if (Modifier.isPublic(m)
                        && Modifier.isStatic(m)
                        && Modifier.isFinal(m)
                        && (f.getType() == long.class || f.getType() == int.class)) {
                    seen++;
                    if (!TABLE.containsKey(k.getSimpleName() + "." + f.getName())) {
                        missing.add(k.getSimpleName() + "." + f.getName());
                    }
                }
            }
        }
        assertTrue(
                missing.isEmpty(),
                "constants with no C expression in LayoutConformanceTest.TABLE "
                        + "(add one, so they are checked against gcc): " + missing);
        assertEquals(TABLE.size(), seen, "the table and the classes' constants differ in number");
    }

    @Test
    void theVerbsAbiNumbersTheDispatchReliesOn() {
        // Spot values from verbs-abi.md, so a wrong table entry cannot make both sides agree on nonsense.
        assertEquals(208, ContextLayout.OPS_POST_SEND);
        assertEquals(96, ContextLayout.OPS_POLL_CQ);
        assertEquals(-1L, ContextLayout.ABI_IS_EXTENDED);
        assertEquals(648, cValues.get("hand.ContextLayout.VERBS_CONTEXT_SIZE"));
        assertEquals(-320, ContextLayout.VCTX_QUERY_PORT - ContextLayout.VERBS_CONTEXT_CONTEXT);
        assertEquals(-104, ContextLayout.VCTX_QUERY_DEVICE_EX - ContextLayout.VERBS_CONTEXT_CONTEXT);
        assertEquals(-120, ContextLayout.VCTX_CREATE_CQ_EX - ContextLayout.VERBS_CONTEXT_CONTEXT);
        assertEquals(-8, ContextLayout.VCTX_SZ - ContextLayout.VERBS_CONTEXT_CONTEXT);
        assertEquals(
                ContextLayout.VERBS_CONTEXT_SIZE,
                ContextLayout.VERBS_CONTEXT_CONTEXT + ContextLayout.SIZE,
                "ibv_context must be the last member of verbs_context");
    }

    // ---- (b) generated layouts ------------------------------------------------------------

    /** The top-level generated classes of a package, found on the class path (directory or jar). */
    static List<Class<?>> generatedClasses(String pkg) throws IOException, URISyntaxException, ClassNotFoundException {
        String dir = (GENERATED + pkg).replace('.', '/');
        Set<String> names = new TreeSet<>();
        Enumeration<URL> urls = LayoutConformanceTest.class.getClassLoader().getResources(dir);
        for (URL url : Collections.list(urls)) {
            if (url.getProtocol().equals("file")) {
                try (Stream<Path> s = Files.list(Path.of(url.toURI()))) {
                    s.map(p -> p.getFileName().toString()).forEach(names::add);
                }
            } else if (url.getProtocol().equals("jar")) {
                JarURLConnection conn = (JarURLConnection) url.openConnection();
                try (JarFile jar = conn.getJarFile()) {
                    for (JarEntry e : Collections.list(jar.entries())) {
                        if (e.getName().startsWith(dir + "/") && e.getName().indexOf('/', dir.length() + 1) < 0) {
                            names.add(e.getName().substring(dir.length() + 1));
                        }
                    }
                }
            }
        }
        List<Class<?>> classes = new ArrayList<>();
        for (String n : names) {
            if (n.endsWith(".class") && !n.contains("$")) {
                classes.add(Class.forName(GENERATED + pkg + "." + n.substring(0, n.length() - 6)));
            }
        }
        return classes;
    }

    /** {@code X.layout()} of a generated class, or null when it has none (header class, function pointers). */
    static GroupLayout layoutOf(Class<?> k) {
        try {
            Method m = k.getMethod("layout");
            if (!Modifier.isStatic(m.getModifiers()) || !GroupLayout.class.isAssignableFrom(m.getReturnType())) {
                return null;
            }
            return (GroupLayout) m.invoke(null);
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The C type of a top-level generated class: {@code struct X}, {@code union X} or a typedef name. */
    static String cTypeOf(Class<?> k, GroupLayout l) {
        String name = l.name().orElse("");
        boolean typedefAlias =
                k.getSuperclass() != Object.class; // e.g. __pthread_list_t extends __pthread_internal_list
        if (typedefAlias || name.isEmpty() || name.startsWith("$anon$")) {
            return k.getSimpleName(); // typedef of an anonymous struct/union
        }
        return (l instanceof UnionLayout ? "union " : "struct ") + name;
    }

    private static boolean anonymous(MemoryLayout m) {
        return m.name().isEmpty() || m.name().get().startsWith("$anon$");
    }

    /**
     * Walks a group layout: for every named member, its offset and size; anonymous (flattened)
     * structs/unions are entered and their members addressed by name, as C11 allows.
     */
    private static void walk(String keyPrefix, String cType, String cPath, GroupLayout g, long base, List<Item> out) {
        long offset = 0;
        for (MemoryLayout m : g.memberLayouts()) {
            long at = base + (g instanceof StructLayout ? offset : 0);
            if (g instanceof StructLayout) {
                offset += m.byteSize();
            }
            if (m instanceof PaddingLayout) {
                continue;
            }
            if (anonymous(m)) {
                if (m instanceof GroupLayout inner) {
                    walk(keyPrefix, cType, cPath, inner, at, out);
                } else {
                    fail(keyPrefix + ": unnamed member that is not a struct/union: " + m);
                }
                continue;
            }
            String path =
                    cPath.isEmpty() ? m.name().get() : cPath + "." + m.name().get();
            out.add(new Item(keyPrefix + "." + path + "@offset", "offsetof(" + cType + ", " + path + ")", at, false));
            out.add(new Item(
                    keyPrefix + "." + path + "@size",
                    "sizeof(((" + cType + " *)0)->" + path + ")",
                    m.byteSize(),
                    false));
            if (m instanceof GroupLayout inner) {
                walk(keyPrefix, cType, path, inner, at, out);
            }
        }
    }

    /** Nested generated classes with a layout: C member path (outer names joined by '.') -> class. */
    private static void nested(Class<?> k, String path, Map<String, Class<?>> out) {
        for (Class<?> n : k.getDeclaredClasses()) {
            if (layoutOf(n) != null) {
                String p = path.isEmpty() ? n.getSimpleName() : path + "." + n.getSimpleName();
                out.put(p, n);
                nested(n, p, out);
            }
        }
    }

    private static List<Item> generatedLayoutItems() throws Exception {
        List<Item> items = new ArrayList<>();
        for (String pkg : PACKAGES) {
            int structs = 0;
            for (Class<?> k : generatedClasses(pkg)) {
                GroupLayout l = layoutOf(k);
                if (l == null) {
                    continue;
                }
                structs++;
                String cType = cTypeOf(k, l);
                String key = "gen." + pkg + "." + k.getSimpleName();
                long sizeof = (long) k.getMethod("sizeof").invoke(null);
                assertEquals(l.byteSize(), sizeof, key + ".sizeof() vs layout().byteSize()");
                items.add(new Item(key + "@sizeof", "sizeof(" + cType + ")", sizeof, false));
                items.add(new Item(key + "@alignof", "_Alignof(" + cType + ")", l.byteAlignment(), false));
                walk(key, cType, "", l, 0, items);
                Map<String, Class<?>> inner = new LinkedHashMap<>();
                nested(k, "", inner);
                for (Map.Entry<String, Class<?>> e : inner.entrySet()) {
                    long s = (long) e.getValue().getMethod("sizeof").invoke(null);
                    items.add(new Item(
                            key + "." + e.getKey() + "@class-sizeof",
                            "sizeof(((" + cType + " *)0)->" + e.getKey() + ")",
                            s,
                            false));
                }
            }
            assertTrue(
                    structs >= (pkg.equals("ibverbs") ? 40 : 15),
                    "found only " + structs + " generated struct/union classes in " + pkg);
        }
        return items;
    }

    @Test
    void everyGeneratedStructMatchesGcc() {
        assertTrue(
                generatedLayouts.size() >= 500,
                "expected hundreds of generated layout items, got " + generatedLayouts.size());
        compare("generated layouts", generatedLayouts);
    }

    @Test
    void generatedLayoutsWalkSeesTheFieldsTheNotesName() {
        // The walk must have reached fields inside named and anonymous unions.
        Set<String> keys = new TreeSet<>();
        generatedLayouts.forEach(i -> keys.add(i.key()));
        for (String k : List.of(
                "gen.ibverbs.ibv_send_wr.wr.rdma.rkey@offset",
                "gen.ibverbs.ibv_send_wr.imm_data@offset",
                "gen.ibverbs.ibv_send_wr.bind_mw.bind_info.length@offset",
                "gen.ibverbs.ibv_wc.invalidated_rkey@offset",
                "gen.ibverbs.ibv_context.ops.post_send@offset",
                "gen.ibverbs.verbs_context.query_port@offset",
                "gen.rdmacm.rdma_cm_id.pd@offset",
                "gen.rdmacm.ibv_gid.global.interface_id@offset",
                "gen.ibverbs.ibv_send_wr.wr.atomic@class-sizeof")) {
            assertTrue(keys.contains(k), "the layout walk did not produce " + k);
        }
        assertEquals(48, cValues.get("gen.ibverbs.ibv_send_wr.wr.rdma.rkey@offset"));
        assertEquals(416, cValues.get("gen.rdmacm.rdma_cm_id@sizeof"));
    }

    /** Every generated {@code f$offset()} accessor agrees with the layout offsets checked above. */
    @Test
    void generatedOffsetAccessorsAgreeWithTheCheckedLayouts() throws Exception {
        int checked = 0;
        for (String pkg : PACKAGES) {
            List<Class<?>> all = new ArrayList<>();
            for (Class<?> k : generatedClasses(pkg)) {
                all.add(k);
                Map<String, Class<?>> inner = new LinkedHashMap<>();
                nested(k, "", inner);
                all.addAll(inner.values());
            }
            for (Class<?> k : all) {
                GroupLayout l = layoutOf(k);
                if (l == null) {
                    continue;
                }
                List<Item> direct = new ArrayList<>();
                walk("", "", "", l, 0, direct);
                Map<String, Long> offsets = new LinkedHashMap<>();
                direct.stream()
                        .filter(i -> i.key().endsWith("@offset"))
                        .forEach(i -> offsets.put(i.key().substring(1, i.key().length() - 7), i.javaValue()));
                for (Method m : k.getDeclaredMethods()) {
                    if (m.getName().endsWith("$offset")
                            && m.getParameterCount() == 0
                            && Modifier.isStatic(m.getModifiers())) {
                        String field = m.getName().substring(0, m.getName().length() - 7);
                        Long expected = offsets.get(field);
                        assertTrue(
                                expected != null,
                                k.getName() + "." + m.getName() + ": no such member in the layout walk");
                        assertEquals(expected, (long) m.invoke(null), k.getName() + "." + m.getName());
                        checked++;
                    }
                }
            }
        }
        assertTrue(checked >= 300, "checked only " + checked + " $offset() accessors");
    }

    // ---- constants -------------------------------------------------------------------------

    private static List<Item> constantItems() throws ReflectiveOperationException {
        List<Item> items = new ArrayList<>();
        for (String pkg : PACKAGES) {
            Class<?> header = Class.forName(GENERATED + pkg + "." + pkg + "_h");
            for (Method m : header.getMethods()) {
                if (Modifier.isStatic(m.getModifiers())
                        && m.getParameterCount() == 0
                        && (m.getReturnType() == int.class || m.getReturnType() == long.class)
                        && m.getName().matches("[A-Z][A-Z0-9_]*")) {
                    long v = ((Number) m.invoke(null)).longValue();
                    items.add(new Item(
                            "const." + pkg + "." + m.getName(), m.getName(), v, m.getReturnType() == int.class));
                }
            }
        }
        items.sort((a, b) -> a.key().compareTo(b.key()));
        return items;
    }

    @Test
    void everyGeneratedConstantMatchesGcc() {
        assertTrue(constants.size() >= 300, "expected hundreds of generated constants, got " + constants.size());
        compare("generated constants", constants);
    }

    @Test
    void namedEnumConstantsHaveTheirCValues() throws Exception {
        Map<String, Long> known = new LinkedHashMap<>();
        known.put("const.ibverbs.IBV_WR_RDMA_WRITE", 0L);
        known.put("const.ibverbs.IBV_WR_SEND", 2L);
        known.put("const.ibverbs.IBV_WR_RDMA_READ", 4L);
        known.put("const.ibverbs.IBV_WC_SUCCESS", 0L);
        known.put("const.ibverbs.IBV_WC_RETRY_EXC_ERR", 12L);
        known.put("const.ibverbs.IBV_WC_RECV", 128L);
        known.put("const.ibverbs.IBV_ACCESS_LOCAL_WRITE", 1L);
        known.put("const.ibverbs.IBV_ACCESS_REMOTE_ATOMIC", 8L);
        known.put("const.ibverbs.IBV_ACCESS_OPTIONAL_RANGE", 0x3ff00000L);
        known.put("const.ibverbs.IBV_QPS_RTS", 3L);
        known.put("const.ibverbs.IBV_QP_STATE", 1L);
        known.put("const.ibverbs.IBV_SEND_SIGNALED", 2L);
        known.put("const.ibverbs.IBV_QPT_RC", 2L);
        known.put("const.rdmacm.RDMA_PS_TCP", 0x0106L);
        known.put("const.rdmacm.RDMA_CM_EVENT_ESTABLISHED", 9L);
        Map<String, Long> java = new LinkedHashMap<>();
        constants.forEach(i -> java.put(i.key(), i.javaValue()));
        for (Map.Entry<String, Long> e : known.entrySet()) {
            assertEquals(e.getValue(), cValues.get(e.getKey()), "C value of " + e.getKey());
            assertEquals(e.getValue(), java.get(e.getKey()), "Java value of " + e.getKey());
        }
        assertEquals(0, org.verbs4j.natives.generated.ibverbs.ibverbs_h.IBV_WR_RDMA_WRITE());
        assertEquals(0x0106, org.verbs4j.natives.generated.rdmacm.rdmacm_h.RDMA_PS_TCP());
    }

    // ---- errno -----------------------------------------------------------------------------

    private static List<Item> errnoItems() throws IllegalAccessException {
        List<Item> items = new ArrayList<>();
        for (Field f : Errno.class.getFields()) {
            if (Modifier.isStatic(f.getModifiers())
                    && f.getType() == int.class
                    && f.getName().matches("E[A-Z]+")) {
                items.add(new Item("errno." + f.getName(), f.getName(), f.getInt(null), true));
            }
        }
        return items;
    }

    @Test
    void errnoConstantsMatchTheCLibrary() throws IllegalAccessException {
        assertTrue(errnos.size() >= 30, "expected Errno's constants, got " + errnos.size());
        compare("errno constants", errnos);
        for (Field f : Errno.class.getFields()) {
            if (f.getType() == int.class && f.getName().matches("E[A-Z]+")) {
                assertEquals(f.getName(), Errno.name(f.getInt(null)), "Errno.name(" + f.getName() + ")");
            }
        }
    }

    @Test
    void totalItemCount() {
        int total = handWritten.size() + generatedLayouts.size() + constants.size() + errnos.size();
        assertEquals(total, cValues.size(), "the probe printed a different number of items");
        assertTrue(total >= 1000, "compared only " + total + " items");
    }
}
