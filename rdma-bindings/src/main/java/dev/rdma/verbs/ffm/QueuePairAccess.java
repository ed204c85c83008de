package dev.rdma.verbs.ffm;

import java.lang.foreign.MemorySegment;

/**
 * The internal hook through which the connection manager ({@code dev.rdma.verbs.cm})
 * applies a {@code struct ibv_qp_attr} filled by {@code rdma_init_qp_attr} to a queue
 * pair of the API package with {@code ibv_modify_qp}, without a public method taking
 * native memory. {@code dev.rdma.verbs.QueuePair} installs it when its class is
 * initialised, which has happened by the time any queue pair exists. Typed with
 * {@code Object} so that this package stays independent of the API.
 */
public interface QueuePairAccess {

	/**
	 * Calls {@code ibv_modify_qp(qp, attr, mask)} on the open queue pair {@code qp}, or
	 * throws (closed QP: IllegalStateException; refused: VerbsException naming
	 * {@code what}).
	 */
	void modify(Object qp, MemorySegment attr, int mask, String what);

	/** Holder of the installed hook. */
	final class Holder {

		private Holder() {
		}

		private static volatile QueuePairAccess access;

		public static void install(QueuePairAccess a) {
			access = a;
		}

		public static QueuePairAccess get() {
			QueuePairAccess a = access;
			if (a == null) {
				throw new IllegalStateException("QueuePair has not installed its access hook");
			}
			return a;
		}

	}

}
