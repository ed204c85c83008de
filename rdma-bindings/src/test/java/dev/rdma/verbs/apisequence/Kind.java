package dev.rdma.verbs.apisequence;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The kinds of action a sequence is made of. Each has the name used by
 * {@code rdma.sequence.exclude} and a weight (how often the generator picks it when its
 * preconditions hold).
 */
public enum Kind {

	CREATE_CHANNEL("createChannel", 3, "ibv_create_comp_channel"),
	CREATE_CQ("createCq", 4, "a legacy CQ (ibv_create_cq), with or without a channel"),
	CREATE_EXT_CQ("createExtCq", 4, "an extended CQ (ibv_create_cq_ex), random wc_flags / channel / flags"),
	CREATE_BUFFER("createBuffer", 3, "a WorkCompletionBuffer of 1..8 entries"),
	CREATE_QP("createQp", 4, "a loopback RC QP on two open CQs (maybe the same one)"),
	CREATE_MISUSE("createMisuse", 2, "bad sizes, comp vectors, closed channels/CQs: refused, nothing leaks"),
	CLOSE_QP("closeQp", 2, "LoopbackQueuePair.close(): its unpolled work may legitimately vanish"),
	CLOSE_CQ("closeCq", 3, "close a CQ: EBUSY (stays usable) while a QP uses it"),
	CLOSE_CHANNEL("closeChannel", 2, "close a channel: EBUSY (stays usable) while a CQ uses it"),
	CLOSE_BUFFER("closeBuffer", 2, "close a buffer (twice, sometimes)"),
	USE_CLOSED("useClosed", 2, "any call on a closed CQ, channel, QP or buffer: IllegalStateException"),
	POST("post", 12, "post receive/send/pair on an open QP (never beyond its depth: no CQ overrun)"),
	QP_ERROR("qpError", 1, "move a QP to the error state: its outstanding work flushes"),
	POLL("poll", 10, "poll(buffer) and read every view"), POLL_HANDLER("pollHandler", 8, "poll(buffer, handler)"),
	READ_CLOSED_BUFFER("readClosedBuffer", 2, "views of a closed buffer: IllegalStateException"),
	STALE_VIEW("staleView", 1, "a view read after its poll returned: a value or a refusal, never a crash"),
	POLL_CLOSED_BUFFER("pollClosedBuffer", 2, "poll a legacy CQ into a closed buffer: refused, nothing taken"),
	POLL_CLOSED_BUFFER_EXTENDED("pollClosedBufferExtended", 2,
			"poll an extended CQ into a closed buffer: refused, nothing taken"),
	RAW_ITERATOR("rawIterator", 4, "startPoll / nextPoll until false / endPoll, then startPoll again"),
	NESTED_LEGACY("nestedLegacy", 3, "a legacy CQ's handler polls or resizes that CQ: refused, nothing taken"),
	NESTED_EXTENDED("nestedExtended", 3,
			"an extended CQ's handler polls, resizes or startPolls that CQ: refused, nothing taken"),
	BATCH_REENTRY("batchReentry", 2,
			"between startPoll and endPoll the same thread polls, resizes, startPolls or closes that CQ: refused"),
	NESTED_CLOSE("nestedClose", 2, "a handler closes its own CQ or the buffer being polled into: refused"),
	NESTED_SAME_BUFFER("nestedSameBuffer", 2, "a handler polls another CQ into the buffer in use: refused"),
	NESTED_OTHER("nestedOther", 3, "a handler polls another CQ, posts, arms, acks: allowed"),
	WAIT_FOR_POLL("waitForPoll", 2,
			"another thread polls/resizes a legacy CQ while its handler runs: it waits for the handler"),
	WAIT_FOR_POLL_EXTENDED("waitForPollExtended", 2,
			"another thread polls/resizes/startPolls an extended CQ inside its handler or raw batch: it waits"),
	CLOSE_CQ_DURING_POLL("closeCqDuringPoll", 1, "another thread closes a CQ while its handler runs: waits, closes"),
	CLOSE_BUFFER_DURING_POLL("closeBufferDuringPoll", 1,
			"another thread closes the buffer being polled into: waits for the poll"),
	CONCURRENT_POLL("concurrentPoll", 2, "2-4 threads poll one legacy CQ while the main thread posts"),
	CONCURRENT_EXTENDED("concurrentExtended", 2,
			"2-4 threads poll one extended CQ (also in parallel blocks and raw batches) while the main thread posts"),
	PARALLEL("parallel", 3,
			"2-4 threads run random polls, posts, resizes, events, raw batches; one may close a CQ/buffer/channel"),
	RESIZE("resize", 3, "resize to a size that holds every possible completion; bad sizes refused"),
	REQUEST_NOTIFY("requestNotify", 4, "ibv_req_notify_cq (refused without a channel)"),
	GET_EVENT("getEvent", 4, "getEvent() / getEvent(timeout, waker): an event of this channel's CQs or null"),
	AWAIT("await", 2, "await(timeout, waker): never WOKEN unless woken; TIMEOUT only after the timeout"),
	ACK_EVENTS("ackEvents", 3, "ackEvents() / ackEvents(n); more than got is refused"),
	WAKE("wake", 1, "a waker signalled from another thread ends getEvent(10 s, waker) early"),
	CHANNEL_REFUSED_CLOSE("channelRefusedClose", 2,
			"close of a channel with CQs: EBUSY, then await/getEvent as before and an event still arrives"),
	CLOSE_CHANNEL_DURING_WAIT("closeChannelDuringWait", 1, "close a channel while another thread waits on it");

	private final String id;

	private final int weight;

	private final String what;

	Kind(String id, int weight, String what) {
		this.id = id;
		this.weight = weight;
		this.what = what;
	}

	/** The name in {@code rdma.sequence.exclude} and in the statistics. */
	public String id() {
		return id;
	}

	public int weight() {
		return weight;
	}

	public String what() {
		return what;
	}

	@Override
	public String toString() {
		return id;
	}

	/**
	 * Parses a comma-separated list of ids (case-insensitive); fails on an unknown one,
	 * listing the valid ones.
	 */
	public static Set<Kind> parse(String list) {
		Set<Kind> out = EnumSet.noneOf(Kind.class);
		if (list == null || list.isBlank()) {
			return out;
		}
		for (String s : list.split("[,\\s]+")) {
			if (s.isBlank()) {
				continue;
			}
			Kind k = Arrays.stream(values())
				.filter(v -> v.id.toLowerCase(Locale.ROOT).equals(s.trim().toLowerCase(Locale.ROOT)))
				.findFirst()
				.orElseThrow(() -> new IllegalArgumentException(
						"unknown action kind '" + s + "' in rdma.sequence.exclude; kinds: "
								+ Arrays.stream(values()).map(Kind::id).collect(Collectors.joining(","))));
			out.add(k);
		}
		return out;
	}

}
