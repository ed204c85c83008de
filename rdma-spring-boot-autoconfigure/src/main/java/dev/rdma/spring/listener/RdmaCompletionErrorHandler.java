package dev.rdma.spring.listener;

import dev.rdma.verbs.WorkCompletion;

/**
 * Receives the failed completions (status other than success) of a queue whose listener
 * names this bean in
 * {@link dev.rdma.spring.annotation.RdmaCompletionListener#errorHandler()}. Runs on the
 * poller thread; the view is valid only during the call.
 */
@FunctionalInterface
public interface RdmaCompletionErrorHandler {

	void onFailedCompletion(String queue, WorkCompletion completion);

}
