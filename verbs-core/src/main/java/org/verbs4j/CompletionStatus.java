package org.verbs4j;

import org.verbs4j.natives.LibIbverbs;

/**
 * {@code enum ibv_wc_status} values and libibverbs' own text for each ({@code ibv_wc_status_str}),
 * fetched once so that reading a status text on the data path allocates nothing.
 */
public final class CompletionStatus {
    public static final int SUCCESS = 0, LOC_LEN_ERR = 1, LOC_QP_OP_ERR = 2, LOC_EEC_OP_ERR = 3, LOC_PROT_ERR = 4,
            WR_FLUSH_ERR = 5, MW_BIND_ERR = 6, BAD_RESP_ERR = 7, LOC_ACCESS_ERR = 8, REM_INV_REQ_ERR = 9,
            REM_ACCESS_ERR = 10, REM_OP_ERR = 11, RETRY_EXC_ERR = 12, RNR_RETRY_EXC_ERR = 13, LOC_RDD_VIOL_ERR = 14,
            REM_INV_RD_REQ_ERR = 15, REM_ABORT_ERR = 16, INV_EECN_ERR = 17, INV_EEC_STATE_ERR = 18, FATAL_ERR = 19,
            RESP_TIMEOUT_ERR = 20, GENERAL_ERR = 21, TM_ERR = 22, TM_RNDV_INCOMPLETE = 23;

    private static final String[] TEXT = new String[24];

    static {
        for (int i = 0; i < TEXT.length; i++) {
            TEXT[i] = LibIbverbs.wcStatusStr(i);
        }
    }

    private CompletionStatus() {
    }

    /** libibverbs' text for a status. */
    public static String text(int status) {
        return status >= 0 && status < TEXT.length ? TEXT[status] : LibIbverbs.wcStatusStr(status);
    }
}
