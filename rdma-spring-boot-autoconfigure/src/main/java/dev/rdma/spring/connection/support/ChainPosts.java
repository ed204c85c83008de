package dev.rdma.spring.connection.support;

import java.util.ArrayList;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.verbs.ChainPostException;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.SendWorkRequest;

/**
 * The post of one chain of a {@link SendSequencer} on a connection's QP
 * ({@code ibv_post_send}; one element: the single post) and what the provider's refusal
 * means: how many elements were posted ({@link ChainPostException#postedCount()}; 0 for
 * any other failure), logged at WARN (at debug while the connection closes, the one time
 * a refusal is expected).
 */
final class ChainPosts extends PeerPart {

	private final QueuePair qp;

	/** The provider's last refusal, for the owner of a refused batch. */
	private volatile @Nullable RuntimeException lastRefusal;

	ChainPosts(PeerConnection peer, ConnectionSettings settings, ConnectionCounters counters, QueuePair qp) {
		super(peer, settings, counters);
		this.qp = qp;
	}

	/** Posts {@code chain}; how many of its elements were posted. Never throws. */
	int post(ArrayList<SendWorkRequest> chain) {
		int n = chain.size();
		try {
			qp.postSend(chain); // a chain of one is the single post (the binding's)
			return n;
		}
		catch (ChainPostException ex) {
			if (ex.postedCount() < 0) {
				// the provider named no element: a double give-back would corrupt the
				// pool, a leak is bounded (the close's timeout): take all as posted
				logger.warn("Posting " + n + " sends on connection '" + settings.name()
						+ "' failed without naming an element; taken as posted", ex);
				return n;
			}
			refused(ex, n - ex.postedCount());
			return ex.postedCount();
		}
		catch (RuntimeException ex) {
			refused(ex, n);
			return 0;
		}
	}

	@Nullable RuntimeException lastRefusal() {
		return lastRefusal;
	}

	private void refused(RuntimeException ex, int notPosted) {
		lastRefusal = ex;
		if (peer.isClosing() || peer.state() != ConnectionState.ESTABLISHED) {
			logger.debug("Connection '" + settings.name() + "' is closing: " + notPosted + " sends not posted: " + ex);
		}
		else {
			logger.warn(notPosted + " sends on connection '" + settings.name() + "' (" + peer
					+ ") were refused by the provider (counted in sends.refused and send.errors)", ex);
		}
	}

}
