package dev.rdma.verbs;

import java.lang.foreign.MemorySegment;

import org.jspecify.annotations.Nullable;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The lazy view of an extended CQ's current completion, handed to a handler during
 * {@link ExtendedCompletionQueue#poll(WorkCompletionBuffer, CompletionHandler)} and
 * returned by {@link ExtendedCompletionQueue#current()}: each field is read through the
 * provider's reader when asked for, and only while the CQ's iterator stands on a
 * completion for the calling thread (not after a {@code nextPoll()} that returned false
 * or threw, nor after {@code endPoll()}; otherwise, or for a field not requested at
 * creation, {@link IllegalStateException} before any native call). One per CQ, reused for
 * every completion.
 */
final class ExtendedCompletionView implements WorkCompletion {

	private final ExtendedCompletionQueue queue;

	private final CqExReaders r;

	ExtendedCompletionView(ExtendedCompletionQueue queue, CqExReaders readers) {
		this.queue = queue;
		this.r = readers;
	}

	private MemorySegment reader(MemorySegment fn, @Nullable WcExFlag flag) {
		if (!queue.hasCurrentCompletion() || fn.address() == 0) {
			throw unreadable(flag); // out of line: keeps this method small enough to
									// inline everywhere
		}
		return fn;
	}

	private RuntimeException unreadable(@Nullable WcExFlag flag) {
		if (!queue.hasCurrentCompletion()) {
			return outsideBatch();
		}
		return flag == null ? new IllegalStateException("the provider has no reader for this field")
				: CqExReaders.notRequested(flag);
	}

	private IllegalStateException outsideBatch() {
		return queue.noCurrentCompletion("an extended-CQ completion was read");
	}

	private void requireBatch() {
		if (!queue.hasCurrentCompletion()) {
			throw outsideBatch();
		}
	}

	@Override
	public long wrId() {
		requireBatch();
		return r.wrId();
	}

	@Override
	public int statusCode() {
		requireBatch();
		return r.status();
	}

	@Override
	public int opcodeCode() {
		return r.readInt(reader(r.readOpcode, null));
	}

	@Override
	public int vendorErr() {
		return r.readInt(reader(r.readVendorErr, null));
	}

	@Override
	public int byteLen() {
		reader(r.readByteLen, WcExFlag.BYTE_LEN);
		return r.byteLen();
	}

	@Override
	public int immData() {
		reader(r.readImmData, WcExFlag.IMM);
		return Integer.reverseBytes(r.immDataRaw());
	}

	@Override
	public int invalidatedRkey() {
		reader(r.readImmData, WcExFlag.IMM);
		return r.immDataRaw();
	}

	@Override
	public int qpNum() {
		reader(r.readQpNum, WcExFlag.QP_NUM);
		return r.qpNum();
	}

	@Override
	public int srcQp() {
		reader(r.readSrcQp, WcExFlag.SRC_QP);
		return r.srcQp();
	}

	@Override
	public int wcFlags() {
		return r.readInt(reader(r.readWcFlags, null));
	}

	@Override
	public int pkeyIndex() {
		throw new IllegalStateException(
				"pkey_index is not available from an extended CQ " + "(verbs.h has no ibv_wc_read_pkey_index)");
	}

	@Override
	public int slid() {
		reader(r.readSlid, WcExFlag.SLID);
		return r.slid();
	}

	@Override
	public int sl() {
		reader(r.readSl, WcExFlag.SL);
		return r.sl() & 0xff;
	}

	@Override
	public int dlidPathBits() {
		reader(r.readDlidPathBits, WcExFlag.DLID_PATH_BITS);
		return r.dlidPathBits() & 0xff;
	}

	@Override
	public long completionTimestamp() {
		reader(r.readCompletionTs, WcExFlag.COMPLETION_TIMESTAMP);
		return r.completionTimestamp();
	}

	@Override
	public long completionWallclockNanos() {
		reader(r.readWallclock, WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK);
		return r.completionWallclockNanos();
	}

	@Override
	public int cvlan() {
		reader(r.readCvlan, WcExFlag.CVLAN);
		return r.cvlan() & 0xffff;
	}

	@Override
	public int flowTag() {
		reader(r.readFlowTag, WcExFlag.FLOW_TAG);
		return r.flowTag();
	}

	@Override
	public TmInfo tmInfo() {
		reader(r.readTmInfo, WcExFlag.TM_INFO);
		MemorySegment info = r.tmInfo();
		return new TmInfo(info.get(JAVA_LONG, 0), info.get(JAVA_INT, 8));
	}

	/*
	 * Overridden, not inherited: a default method's type profile is shared by every
	 * WorkCompletion class, so a JIT-compiled caller that only ever sees this class would
	 * still dispatch statusCode() & co. virtually once another class (legacy view,
	 * extended view, snapshot) has been used anywhere in the JVM.
	 */
	@Override
	public boolean isSuccess() {
		return statusCode() == 0;
	}

	@Override
	public WcStatus status() {
		return WcStatus.of(statusCode());
	}

	@Override
	public WcOpcode opcode() {
		return WcOpcode.of(opcodeCode());
	}

	@Override
	public boolean hasFlag(WcFlag flag) {
		return flag.isSet(wcFlags());
	}

	@Override
	public WorkCompletionSnapshot copy() {
		return Snapshots.of(this, queue.wcFlags(), false);
	}

	@Override
	public String toString() {
		return "WorkCompletion[wr_id=" + wrId() + ", status=" + status() + "]";
	}

}
