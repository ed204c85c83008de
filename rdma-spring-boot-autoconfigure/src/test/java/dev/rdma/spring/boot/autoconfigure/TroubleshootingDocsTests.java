package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Every error message the starter can print at startup has an entry in
 * docs/troubleshooting.md, and every entry there is a message the code still prints.
 * <p>
 * The rule, read from the main sources of this module as text:
 * <ul>
 * <li>A <em>message</em> is the argument that becomes the text the user reads: the
 * {@code reason} (second argument) of every {@code new RdmaConfigurationException(...)}
 * (the {@code Reason:} line of the failure analysis), the message of every
 * {@code new IllegalStateException(...)} of {@link RdmaStartupChecks} (the Spring Boot
 * version check) and the description of every {@code new FailureAnalysis(...)} of
 * {@link RdmaBackedOffFailureAnalyzer}. {@link RdmaFailureAnalyzer}'s own frame around
 * the reason is shown once in the document and is not a message.</li>
 * <li>When that argument is a plain name, it is followed: a local
 * {@code String name = ...;} is read at its initializer, and a parameter of the enclosing
 * method (a helper such as {@code error(id, reason, action)}) at every call of that
 * method in the same file.</li>
 * <li>A message's <em>fragments</em> are its string literals, trimmed, that hold at least
 * three letters or digits (so {@code "="} or {@code ") "} are not fragments). Values
 * filled in at run time (property paths, numbers, device names) are not fragments; the
 * branches of a {@code ?:} are both fragments, so an entry lists both variants.</li>
 * <li>A message has an entry when one row of a table under "## Startup errors" holds all
 * its fragments in its first cell (the message, written as code with {@code <...>} for
 * what is filled in). A message without fragments fails the test: it cannot be documented
 * by this rule and must be rewritten with its constant text inline.</li>
 * </ul>
 * Runtime warnings in the log (a listener that threw, a connection that ended) and
 * exceptions thrown to the application's own calls (e.g. {@code SendQueueFullException})
 * are not startup messages; the document's "Other problems" covers the common ones by
 * hand.
 */
class TroubleshootingDocsTests {

	private static final Path MAIN = Path.of("src", "main", "java");

	private static final Path DOCUMENT = Path.of("..", "docs", "troubleshooting.md");

	/**
	 * A call whose argument is a message: in which file (null: any), and which argument.
	 */
	private record Source(String file, String call, int argument) {
	}

	private static final List<Source> SOURCES = List.of(new Source(null, "new RdmaConfigurationException(", 1),
			new Source("RdmaStartupChecks.java", "new IllegalStateException(", 0),
			new Source("RdmaBackedOffFailureAnalyzer.java", "new FailureAnalysis(", 0));

	/** A message of the code: where it is, and its fragments. */
	record Message(String where, List<String> fragments) {
	}

	@Test
	void everyMessageOfTheCodeHasAnEntry() throws IOException {
		List<Message> messages = messages();
		assertThat(messages).hasSizeGreaterThan(90);
		List<String> entries = entries();
		List<String> missing = new ArrayList<>();
		for (Message message : messages) {
			assertThat(message.fragments()).as("a message without constant text at %s", message.where()).isNotEmpty();
			if (entries.stream().noneMatch(entry -> matches(entry, message))) {
				missing.add(message.where() + ": " + message.fragments());
			}
		}
		assertThat(missing).as("messages without an entry in docs/troubleshooting.md").isEmpty();
	}

	@Test
	void everyEntryIsAMessageOfTheCode() throws IOException {
		List<Message> messages = messages();
		List<String> stale = new ArrayList<>();
		for (String entry : entries()) {
			if (messages.stream().noneMatch(message -> matches(entry, message))) {
				stale.add(entry);
			}
		}
		assertThat(stale).as("entries of docs/troubleshooting.md that no message of the code matches").isEmpty();
	}

	private static boolean matches(String entry, Message message) {
		return message.fragments().stream().allMatch(entry::contains);
	}

	/** The first cells of the tables under "## Startup errors", without backticks. */
	static List<String> entries() throws IOException {
		String document = Files.readString(DOCUMENT);
		int start = document.indexOf("\n## Startup errors\n");
		assertThat(start).as("docs/troubleshooting.md has a section ## Startup errors").isNotNegative();
		int end = document.indexOf("\n## ", start + 1);
		String section = document.substring(start, (end < 0) ? document.length() : end);
		List<String> entries = new ArrayList<>();
		for (String line : section.lines().toList()) {
			if (line.startsWith("| `")) {
				entries.add(line.substring(2, line.indexOf(" | ", 2)).replace("`", ""));
			}
		}
		return entries;
	}

	/** Every message of the main sources, by the rule of this class. */
	static List<Message> messages() throws IOException {
		List<Path> files;
		try (Stream<Path> walk = Files.walk(MAIN)) {
			files = walk.filter(file -> file.toString().endsWith(".java")).sorted().toList();
		}
		List<Message> messages = new ArrayList<>();
		for (Path file : files) {
			String source = withoutComments(Files.readString(file));
			String name = file.getFileName().toString();
			for (Source kind : SOURCES) {
				if (kind.file() != null && !kind.file().equals(name)) {
					continue;
				}
				int at = source.indexOf(kind.call());
				while (at >= 0) {
					List<String> arguments = arguments(source, at + kind.call().length());
					String where = name + ":" + line(source, at);
					for (String expression : resolve(source, at, arguments.get(kind.argument()))) {
						messages.add(new Message(where, fragments(expression)));
					}
					at = source.indexOf(kind.call(), at + 1);
				}
			}
		}
		return messages;
	}

	/**
	 * The expressions a message argument stands for: itself, or for a plain name the
	 * initializer of its local variable or the arguments of every call of the enclosing
	 * helper method.
	 */
	private static List<String> resolve(String source, int at, String expression) {
		if (!expression.matches("\\w+")) {
			return List.of(expression);
		}
		Matcher local = Pattern.compile("\\bString " + expression + "\\s*=").matcher(source.substring(0, at));
		int declaration = -1;
		while (local.find()) {
			declaration = local.end();
		}
		if (declaration >= 0) {
			return List.of(source.substring(declaration, statementEnd(source, declaration)));
		}
		Matcher method = Pattern.compile("(\\w+)\\(([^()]*\\bString " + expression + "\\b[^()]*)\\)\\s*\\{")
			.matcher(source.substring(0, at));
		String helper = null;
		int index = -1;
		while (method.find()) {
			helper = method.group(1);
			String[] parameters = method.group(2).split(",");
			for (int i = 0; i < parameters.length; i++) {
				if (parameters[i].strip().endsWith(" " + expression)) {
					index = i;
				}
			}
		}
		assertThat(helper).as("the message argument '%s' is neither a local nor a parameter", expression).isNotNull();
		List<String> expressions = new ArrayList<>();
		Matcher call = Pattern.compile("(?<![\\w.])" + helper + "\\(").matcher(source);
		while (call.find()) {
			List<String> arguments = arguments(source, call.end());
			if (arguments.size() > index && !arguments.get(index).startsWith("String ")) {
				expressions.add(arguments.get(index));
			}
		}
		return expressions;
	}

	private static int statementEnd(String source, int from) {
		int depth = 0;
		for (int i = from; i < source.length(); i++) {
			char c = source.charAt(i);
			if (c == '"') {
				i = literalEnd(source, i);
			}
			else if (c == '(') {
				depth++;
			}
			else if (c == ')') {
				depth--;
			}
			else if (c == ';' && depth == 0) {
				return i;
			}
		}
		throw new IllegalStateException("no end of statement after " + from);
	}

	/** The arguments of the call whose '(' ends just before {@code from}. */
	private static List<String> arguments(String source, int from) {
		List<String> arguments = new ArrayList<>();
		int depth = 0;
		int start = from;
		for (int i = from; i < source.length(); i++) {
			char c = source.charAt(i);
			if (c == '"' || c == '\'') {
				i = literalEnd(source, i);
			}
			else if (c == '(' || c == '[' || c == '{') {
				depth++;
			}
			else if (c == ')' || c == ']' || c == '}') {
				if (depth == 0) {
					arguments.add(source.substring(start, i).strip());
					return arguments;
				}
				depth--;
			}
			else if (c == ',' && depth == 0) {
				arguments.add(source.substring(start, i).strip());
				start = i + 1;
			}
		}
		throw new IllegalStateException("unbalanced call at " + from);
	}

	/** The index of the quote that closes the literal opened at {@code open}. */
	private static int literalEnd(String source, int open) {
		char quote = source.charAt(open);
		int i = open + 1;
		while (source.charAt(i) != quote) {
			i += (source.charAt(i) == '\\') ? 2 : 1;
		}
		return i;
	}

	/**
	 * The string literals of an expression that hold at least three letters or digits.
	 */
	static List<String> fragments(String expression) {
		List<String> fragments = new ArrayList<>();
		for (int i = 0; i < expression.length(); i++) {
			char c = expression.charAt(i);
			if (c == '\'') {
				i = literalEnd(expression, i);
			}
			else if (c == '"') {
				int end = literalEnd(expression, i);
				String literal = expression.substring(i + 1, end).replace("\\\"", "\"").replace("\\\\", "\\").strip();
				if (literal.codePoints().filter(Character::isLetterOrDigit).count() >= 3) {
					fragments.add(literal);
				}
				i = end;
			}
		}
		return fragments;
	}

	/** The source with comments blanked out (string and character literals kept). */
	private static String withoutComments(String source) {
		StringBuilder out = new StringBuilder(source.length());
		int i = 0;
		while (i < source.length()) {
			char c = source.charAt(i);
			if (c == '"' || c == '\'') {
				int end = literalEnd(source, i);
				out.append(source, i, end + 1);
				i = end + 1;
			}
			else if (source.startsWith("//", i)) {
				int end = source.indexOf('\n', i);
				i = (end < 0) ? source.length() : end;
			}
			else if (source.startsWith("/*", i)) {
				int end = source.indexOf("*/", i) + 2;
				out.append(source.substring(i, end).replaceAll("[^\n]", " "));
				i = end;
			}
			else {
				out.append(c);
				i++;
			}
		}
		return out.toString();
	}

	private static int line(String source, int at) {
		return (int) source.substring(0, at).chars().filter(c -> c == '\n').count() + 1;
	}

}
