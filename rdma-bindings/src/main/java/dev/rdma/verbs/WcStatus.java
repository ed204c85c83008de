package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;

import java.lang.foreign.MemorySegment;

/**
 * {@code enum ibv_wc_status}, with the text of {@code ibv_wc_status_str}. When the status
 * is not {@link #SUCCESS}, only wr_id, status, qp_num and vendor_err of the completion
 * are valid.
 */
public enum WcStatus {

	SUCCESS("success"), LOC_LEN_ERR("local length error"), LOC_QP_OP_ERR("local QP operation error"),
	LOC_EEC_OP_ERR("local EE context operation error"), LOC_PROT_ERR("local protection error"),
	WR_FLUSH_ERR("Work Request Flushed Error"), MW_BIND_ERR("memory management operation error"),
	BAD_RESP_ERR("bad response error"), LOC_ACCESS_ERR("local access error"),
	REM_INV_REQ_ERR("remote invalid request error"), REM_ACCESS_ERR("remote access error"),
	REM_OP_ERR("remote operation error"), RETRY_EXC_ERR("transport retry counter exceeded"),
	RNR_RETRY_EXC_ERR("RNR retry counter exceeded"), LOC_RDD_VIOL_ERR("local RDD violation error"),
	REM_INV_RD_REQ_ERR("remote invalid RD request"), REM_ABORT_ERR("aborted error"),
	INV_EECN_ERR("invalid EE context number"), INV_EEC_STATE_ERR("invalid EE context state"), FATAL_ERR("fatal error"),
	RESP_TIMEOUT_ERR("response timeout error"), GENERAL_ERR("general error"), TM_ERR("TM error"),
	TM_RNDV_INCOMPLETE("TM software rendezvous"),
	/** A code this binding does not know (a newer rdma-core). */
	UNKNOWN("unknown");

	private static final WcStatus[] BY_CODE = values();

	private final String description;

	WcStatus(String fallback) {
		this.description = nativeText(ordinal(), fallback);
	}

	private static String nativeText(int code, String fallback) {
		if (Ibverbs.WC_STATUS_STR == null || code > 23) {
			return fallback;
		}
		try {
			String s = Native.string((MemorySegment) Ibverbs.WC_STATUS_STR.invokeExact(code));
			return s == null ? fallback : s;
		}
		catch (Throwable t) {
			return fallback;
		}
	}

	/** The numeric {@code ibv_wc_status}. */
	public int code() {
		return this == UNKNOWN ? -1 : ordinal();
	}

	/** {@code ibv_wc_status_str(status)}. */
	public String description() {
		return description;
	}

	/**
	 * The status of a numeric code, {@link #UNKNOWN} for codes this binding does not
	 * know. Allocation-free.
	 */
	public static WcStatus of(int code) {
		return code >= 0 && code < UNKNOWN.ordinal() ? BY_CODE[code] : UNKNOWN;
	}

}
