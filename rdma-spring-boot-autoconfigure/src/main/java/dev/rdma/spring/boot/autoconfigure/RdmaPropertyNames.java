package dev.rdma.spring.boot.autoconfigure;

import java.beans.PropertyDescriptor;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.BeanUtils;
import org.springframework.core.ResolvableType;

/**
 * The property names under {@code rdma.}, derived from {@link RdmaProperties} itself (so
 * a new property is known the moment it exists), with {@code *} for the key of a map
 * ({@code rdma.completion-queues.*.entries}); and the valid name nearest to a mistyped
 * one.
 */
final class RdmaPropertyNames {

	private static final List<String> NAMES = collect(RdmaProperties.PREFIX, RdmaProperties.class, new ArrayList<>());

	private RdmaPropertyNames() {
	}

	/** Every property name, map keys written {@code *}. */
	static List<String> all() {
		return NAMES;
	}

	private static List<String> collect(String prefix, Class<?> type, List<String> names) {
		for (PropertyDescriptor descriptor : BeanUtils.getPropertyDescriptors(type)) {
			if (descriptor.getReadMethod() == null || descriptor.getName().equals("class")) {
				continue;
			}
			String name = prefix + "." + kebab(descriptor.getName());
			ResolvableType property = ResolvableType.forMethodReturnType(descriptor.getReadMethod());
			Class<?> raw = property.resolve(Object.class);
			if (Map.class.isAssignableFrom(raw)) {
				collect(name + ".*", property.asMap().getGeneric(1).resolve(Object.class), names);
			}
			else if (isGroup(raw)) {
				collect(name, raw, names);
			}
			else if (descriptor.getWriteMethod() != null || Collection.class.isAssignableFrom(raw)) {
				names.add(name);
			}
		}
		return names;
	}

	/**
	 * A class of the starter's own that holds further properties: a property class of
	 * {@link RdmaProperties}'s package (not an enum).
	 */
	private static boolean isGroup(Class<?> type) {
		return type.getPackageName().equals(RdmaProperties.class.getPackageName()) && !type.isEnum();
	}

	private static String kebab(String camel) {
		StringBuilder out = new StringBuilder();
		for (char c : camel.toCharArray()) {
			if (Character.isUpperCase(c)) {
				out.append('-').append(Character.toLowerCase(c));
			}
			else {
				out.append(c);
			}
		}
		return out.toString();
	}

	/**
	 * The valid name nearest to {@code unknown} (fewest edits), with the map keys of
	 * {@code unknown} in place of {@code *}; null when none is near enough to be a typo.
	 */
	static @Nullable String nearest(String unknown) {
		String plain = withoutIndexes(unknown);
		String[] parts = plain.split("\\.");
		String leaf = parts[parts.length - 1];
		String best = null;
		int bestDistance = Integer.MAX_VALUE;
		String moved = null;
		int movedDistance = Integer.MAX_VALUE;
		for (String name : NAMES) {
			String[] pattern = name.split("\\.");
			StringBuilder candidate = new StringBuilder();
			for (int i = 0; i < pattern.length; i++) {
				if (i > 0) {
					candidate.append('.');
				}
				candidate.append(pattern[i].equals("*") ? (i < parts.length ? parts[i] : "<key>") : pattern[i]);
			}
			int distance = distance(plain, candidate.toString());
			if (distance < bestDistance) {
				bestDistance = distance;
				best = candidate.toString();
			}
			if (pattern[pattern.length - 1].equals(leaf) && distance < movedDistance) {
				movedDistance = distance;
				moved = candidate.toString();
			}
		}
		// a typo (a few edits, relative to the last segment's length) wins; else the
		// property of that name in another place
		// (rdma.completion-queues.rx.max-sleep is ...polling.max-sleep)
		if (bestDistance <= 2 || moved == null) {
			return best != null && bestDistance <= Math.max(2, leaf.length() / 3) ? best : null;
		}
		return moved;
	}

	private static String withoutIndexes(String name) {
		return name.replaceAll("\\[\\d+]", "");
	}

	/** Levenshtein distance. */
	static int distance(String a, String b) {
		int[] previous = new int[b.length() + 1];
		int[] current = new int[b.length() + 1];
		for (int j = 0; j <= b.length(); j++) {
			previous[j] = j;
		}
		for (int i = 1; i <= a.length(); i++) {
			current[0] = i;
			for (int j = 1; j <= b.length(); j++) {
				int substitute = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
				current[j] = Math.min(substitute, Math.min(previous[j] + 1, current[j - 1] + 1));
			}
			int[] swap = previous;
			previous = current;
			current = swap;
		}
		return previous[b.length()];
	}

}
