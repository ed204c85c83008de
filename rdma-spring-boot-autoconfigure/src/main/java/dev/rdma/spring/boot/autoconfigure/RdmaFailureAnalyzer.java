package dev.rdma.spring.boot.autoconfigure;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.VerbsException;

/**
 * Turns an {@link RdmaConfigurationException} into a description (property, verb, errno)
 * and an action.
 */
public class RdmaFailureAnalyzer extends AbstractFailureAnalyzer<RdmaConfigurationException> {

	@Override
	protected FailureAnalysis analyze(Throwable rootFailure, RdmaConfigurationException cause) {
		StringBuilder description = new StringBuilder("The RDMA configuration could not be applied.\n\n");
		description.append("    ").append(subject(cause.property())).append(": ").append(cause.property()).append('\n');
		description.append("    Reason: ").append(cause.reason()).append('\n');
		if (cause.verb() != null) {
			description.append("    Verb: ")
				.append(cause.verb())
				.append(" failed with errno ")
				.append(cause.errno())
				.append(' ')
				.append(cause.errnoText())
				.append('\n');
			Throwable verbs = cause.getCause();
			while (verbs != null && !(verbs instanceof VerbsException)) {
				verbs = verbs.getCause();
			}
			if (verbs != null && verbs.getMessage() != null) {
				description.append("    Detail: ").append(verbs.getMessage()).append('\n');
			}
		}
		else if (cause.getCause() != null && cause.getCause().getMessage() != null) {
			description.append("    Cause: ").append(cause.getCause().getMessage()).append('\n');
		}
		return new FailureAnalysis(description.toString(), cause.action(), cause);
	}

	/**
	 * What the error is about: a property ({@code rdma.*}) or a listener method (its
	 * {@code bean#method(..)} description).
	 */
	static String subject(String property) {
		if (property.startsWith(RdmaProperties.PREFIX + ".") || property.equals(RdmaProperties.PREFIX)) {
			return "Property";
		}
		return property.startsWith("@RdmaCompletionListener") ? "Listener" : "About";
	}

}
