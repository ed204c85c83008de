package dev.rdma.spring.boot.autoconfigure;

/**
 * The messages of a failed start-up, for assertions: Spring wraps the starter's own
 * exception (which names the property, verb and errno) in a chain of bean-creation
 * exceptions, so a test looks at the whole chain.
 */
final class StartupFailures {

	private StartupFailures() {
	}

	/** The message of {@code failure} and of each of its causes, one per line. */
	static String messages(Throwable failure) {
		StringBuilder all = new StringBuilder();
		for (Throwable t = failure; t != null; t = t.getCause()) {
			all.append(t.getMessage()).append('\n');
		}
		return all.toString();
	}

}
