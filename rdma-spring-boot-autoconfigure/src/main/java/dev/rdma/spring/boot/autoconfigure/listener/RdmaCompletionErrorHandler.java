package dev.rdma.spring.boot.autoconfigure.listener;

import dev.rdma.verbs.WorkCompletion;

/**
 * Receives the failed completions (status other than success) of a queue whose listener names this bean in
 * {@link RdmaCompletionListener#errorHandler()}. Runs on the poller thread; the view is valid only during the call.
 */
@FunctionalInterface
public interface RdmaCompletionErrorHandler {

    void onFailedCompletion(String queue, WorkCompletion completion);
}
