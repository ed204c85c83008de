package dev.rdma.verbs;

/**
 * Receives the completions of
 * {@link CompletionQueue#poll(WorkCompletionBuffer, CompletionHandler)} one at a time, on
 * the polling thread. The view is valid only during the call. On an extended CQ the
 * provider's poll lock is held during the call: do not poll, resize or close the same CQ
 * from inside it.
 */
@FunctionalInterface
public interface CompletionHandler {

	void onCompletion(WorkCompletion completion);

}
