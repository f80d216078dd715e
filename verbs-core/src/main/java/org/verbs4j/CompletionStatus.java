package org.verbs4j;

import org.verbs4j.natives.LibIbverbs;

/**
 * {@code enum ibv_wc_status} values and libibverbs' own text for each ({@code ibv_wc_status_str}),
 * fetched once so that reading a status text on the data path allocates nothing.
 */
public final class CompletionStatus {
    /** {@code IBV_WC_SUCCESS}: the request completed. */
    public static final int SUCCESS = 0;
    /** {@code IBV_WC_LOC_LEN_ERR}: a buffer too small. */
    public static final int LOC_LEN_ERR = 1;
    /** {@code IBV_WC_LOC_QP_OP_ERR}. */
    public static final int LOC_QP_OP_ERR = 2;
    /** {@code IBV_WC_LOC_EEC_OP_ERR}. */
    public static final int LOC_EEC_OP_ERR = 3;
    /** {@code IBV_WC_LOC_PROT_ERR}: an SGE the device may not use. */
    public static final int LOC_PROT_ERR = 4;
    /** {@code IBV_WC_WR_FLUSH_ERR}: flushed, the queue pair is in ERR. */
    public static final int WR_FLUSH_ERR = 5;
    /** {@code IBV_WC_MW_BIND_ERR}. */
    public static final int MW_BIND_ERR = 6;
    /** {@code IBV_WC_BAD_RESP_ERR}. */
    public static final int BAD_RESP_ERR = 7;
    /** {@code IBV_WC_LOC_ACCESS_ERR}. */
    public static final int LOC_ACCESS_ERR = 8;
    /** {@code IBV_WC_REM_INV_REQ_ERR}. */
    public static final int REM_INV_REQ_ERR = 9;
    /** {@code IBV_WC_REM_ACCESS_ERR}: the peer refused the access (grants, rkey, bounds). */
    public static final int REM_ACCESS_ERR = 10;
    /** {@code IBV_WC_REM_OP_ERR}. */
    public static final int REM_OP_ERR = 11;
    /** {@code IBV_WC_RETRY_EXC_ERR}: no ACK from the peer after the retries. */
    public static final int RETRY_EXC_ERR = 12;
    /** {@code IBV_WC_RNR_RETRY_EXC_ERR}: no receive posted at the peer after the RNR retries. */
    public static final int RNR_RETRY_EXC_ERR = 13;
    /** {@code IBV_WC_LOC_RDD_VIOL_ERR}. */
    public static final int LOC_RDD_VIOL_ERR = 14;
    /** {@code IBV_WC_REM_INV_RD_REQ_ERR}. */
    public static final int REM_INV_RD_REQ_ERR = 15;
    /** {@code IBV_WC_REM_ABORT_ERR}. */
    public static final int REM_ABORT_ERR = 16;
    /** {@code IBV_WC_INV_EECN_ERR}. */
    public static final int INV_EECN_ERR = 17;
    /** {@code IBV_WC_INV_EEC_STATE_ERR}. */
    public static final int INV_EEC_STATE_ERR = 18;
    /** {@code IBV_WC_FATAL_ERR}. */
    public static final int FATAL_ERR = 19;
    /** {@code IBV_WC_RESP_TIMEOUT_ERR}. */
    public static final int RESP_TIMEOUT_ERR = 20;
    /** {@code IBV_WC_GENERAL_ERR}. */
    public static final int GENERAL_ERR = 21;
    /** {@code IBV_WC_TM_ERR}. */
    public static final int TM_ERR = 22;
    /** {@code IBV_WC_TM_RNDV_INCOMPLETE}. */
    public static final int TM_RNDV_INCOMPLETE = 23;

    private static final String[] TEXT = new String[24];

    static {
        for (int i = 0; i < TEXT.length; i++) {
            TEXT[i] = LibIbverbs.wcStatusStr(i);
        }
    }

    private CompletionStatus() {}

    /** libibverbs' text for a status. */
    public static String text(int status) {
        return status >= 0 && status < TEXT.length ? TEXT[status] : LibIbverbs.wcStatusStr(status);
    }
}
