package dev.rdma.verbs.exchange;

import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.ReceiveWorkRequest;
import java.time.Duration;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.VerbsStack;

/**
 * One side of an RC ping-pong as {@code ibv_rc_pingpong -e} runs it
 * (libibverbs/examples/rc_pingpong.c): receives (wr_id 1) posted before the exchange into
 * one buffer, sends (wr_id 2) of {@code size} bytes, the client sending first, the next
 * send once both the previous send and a receive completed; completions through a
 * completion channel (one {@code ibv_req_notify_cq} per event). Closing it closes the
 * context and everything in it.
 */
final class PingPongSide extends VerbsStack {

	static final long RECV_WRID = 1;

	static final long SEND_WRID = 2;

	final int size;

	final int rxDepth;

	private int routs;

	PingPongSide(String device, int size, int rxDepth, long mrBytes, QueuePair.Type type) {
		super(device, rxDepth + 1, Math.max(mrBytes, 2L * size),
				cq -> new QueuePair.Attributes(cq, cq, 8, rxDepth, false).withType(type));
		this.size = size;
		this.rxDepth = rxDepth;
		if (type == QueuePair.Type.RC) {
			qp.moveToInit(1); // as rc_pingpong: rxe refuses receives in RESET
		}
	}

	PingPongSide(String device, int size, int rxDepth) {
		this(device, size, rxDepth, 2L * size, QueuePair.Type.RC);
	}

	/**
	 * Posts the receives of the ping-pong and arms the CQ, as rc_pingpong does before the
	 * exchange: the peer may send as soon as the exchange is over, and a completion that
	 * arrives before the CQ is armed raises no event.
	 */
	void postReceives() {
		for (int i = 0; i < rxDepth; i++) {
			qp.postRecv(new ReceiveWorkRequest().wrId(RECV_WRID).buffer(mr, 0, size));
		}
		routs = rxDepth;
		cq.requestNotify(false);
	}

	/**
	 * Runs {@code iterations} ping-pongs; returns the number of completion events. Fails
	 * when no event arrives within {@code timeout} or a completion is not a success.
	 */
	int run(int iterations, boolean client, Duration timeout) {
		int scnt = 0;
		int rcnt = 0;
		long pending = RECV_WRID;
		if (client) {
			send();
			pending |= SEND_WRID;
		}
		int events = 0;
		while (rcnt < iterations || scnt < iterations) {
			CompletionQueue got = channel.getEvent(timeout, null);
			if (got == null) {
				throw new AssertionError("no completion event within " + timeout + " after " + scnt + " sends and "
						+ rcnt + " receives of " + iterations);
			}
			events++;
			cq.ackEvents();
			cq.requestNotify(false);
			int n;
			while ((n = cq.poll(buffer)) > 0) {
				for (int i = 0; i < n; i++) {
					WorkCompletion wc = buffer.get(i);
					if (!wc.isSuccess()) {
						throw new AssertionError("completion of wr_id " + wc.wrId() + " failed: " + wc.status()
								+ " after " + scnt + " sends and " + rcnt + " receives");
					}
					if (wc.wrId() == SEND_WRID) {
						scnt++;
					}
					else {
						if (wc.opcode() != WcOpcode.RECV || wc.byteLen() != size) {
							throw new AssertionError("unexpected receive " + wc.opcode() + " of " + wc.byteLen());
						}
						rcnt++;
						if (--routs <= 1) {
							for (int r = routs; r < rxDepth; r++) {
								qp.postRecv(new ReceiveWorkRequest().wrId(RECV_WRID).buffer(mr, 0, size));
							}
							routs = rxDepth;
						}
					}
					pending &= ~wc.wrId();
					if (scnt < iterations && pending == 0) {
						send();
						pending = RECV_WRID | SEND_WRID;
					}
				}
			}
		}
		return events;
	}

	private void send() {
		qp.postSend(new SendWorkRequest().wrId(SEND_WRID).buffer(mr, size, size));
	}

}
