package dev.rdma.spring.boot.autoconfigure;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Set;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.BindHandler;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.handler.NoUnboundElementsBindHandler;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.context.properties.bind.UnboundConfigurationPropertiesException;
import org.springframework.boot.origin.PropertySourceOrigin;
import org.springframework.core.ResolvableType;
import org.springframework.core.env.Environment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

import dev.rdma.spring.RdmaConfigurationException;

/**
 * Binds {@code rdma.*} strictly: the starter owns the namespace, so a key under
 * {@code rdma.} that no property has ({@code rdma.completion-queue.rx.entries},
 * {@code rdma.completion-queues.rx.entires}) fails startup naming the valid property
 * nearest to it, instead of being ignored. Boot's own
 * {@link NoUnboundElementsBindHandler} finds them (map values included), as it does for
 * {@code @ConfigurationProperties(ignoreUnknownFields = false)}. Environment variables
 * are not checked: the environment is shared with other programs ({@code RDMA_*}
 * variables of test scripts or tools would otherwise fail startup). A value that is not
 * one of an enum property's values ({@code exchange: out-of-bnd}) fails naming the
 * property, the value and the accepted values as the documentation writes them
 * ({@code cm, out-of-band}), instead of the binder's constant names.
 */
final class RdmaPropertiesBinding {

	private static final ConfigurationPropertyName PREFIX = ConfigurationPropertyName.of(RdmaProperties.PREFIX);

	private RdmaPropertiesBinding() {
	}

	/** Whether any property under {@code rdma.} is set (environment variables aside). */
	static boolean configured(Environment environment) {
		for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
			if (checked(source) && source instanceof IterableConfigurationPropertySource iterable
					&& iterable.stream().anyMatch(PREFIX::isAncestorOf)) {
				return true;
			}
		}
		return false;
	}

	private static boolean checked(ConfigurationPropertySource source) {
		return !(source.getUnderlyingSource() instanceof SystemEnvironmentPropertySource);
	}

	/**
	 * Binds {@code rdma.*}; fails with an {@link RdmaConfigurationException} naming every
	 * unknown key, where it was set, and the valid name nearest to it.
	 */
	static RdmaProperties bindStrictly(Environment environment) {
		BindHandler handler = new NoUnboundElementsBindHandler(BindHandler.DEFAULT, RdmaPropertiesBinding::checked);
		try {
			return Binder.get(environment)
				.bind(RdmaProperties.PREFIX, Bindable.of(RdmaProperties.class), handler)
				.orElseGet(RdmaProperties::new);
		}
		catch (BindException ex) {
			if (ex.getCause() instanceof UnboundConfigurationPropertiesException unbound) {
				throw unknown(unbound.getUnboundProperties());
			}
			RdmaConfigurationException invalid = notAnEnumValue(ex);
			if (invalid != null) {
				throw invalid;
			}
			throw ex;
		}
	}

	/**
	 * The starter's message for a value an enum property (or a set of them) does not
	 * accept, or null when {@code ex} is about something else.
	 */
	private static @Nullable RdmaConfigurationException notAnEnumValue(BindException ex) {
		ConfigurationProperty property = ex.getProperty();
		ResolvableType type = ex.getTarget().getType();
		Class<?> target = type.resolve();
		if (target != null && Collection.class.isAssignableFrom(target)) {
			target = type.asCollection().resolveGeneric(0);
		}
		else if (target != null && target.isArray()) {
			target = target.getComponentType();
		}
		if (property == null || target == null || !target.isEnum()) {
			return null;
		}
		List<String> accepted = new ArrayList<>();
		for (Object constant : target.getEnumConstants()) {
			accepted.add(((Enum<?>) constant).name().toLowerCase(Locale.ROOT).replace('_', '-'));
		}
		String name = written(property);
		String values = String.join(", ", accepted);
		return new RdmaConfigurationException(name,
				name + "=" + property.getValue() + " is not one of the accepted values " + values
						+ (property.getOrigin() != null ? " (" + property.getOrigin() + ")" : ""),
				"Set " + name + " to one of " + values + " (docs/configuration.md describes each).");
	}

	/** The name as written (the canonical name lower-cases map keys). */
	private static String written(ConfigurationProperty property) {
		return property.getOrigin() instanceof PropertySourceOrigin origin ? origin.getPropertyName()
				: property.getName().toString();
	}

	private static RdmaConfigurationException unknown(Set<ConfigurationProperty> properties) {
		List<String> lines = new ArrayList<>();
		List<String> suggestions = new ArrayList<>();
		String first = null;
		for (ConfigurationProperty property : properties) {
			String name = written(property);
			first = first == null ? name : first;
			String nearest = RdmaPropertyNames.nearest(name);
			lines.add(name + (property.getOrigin() != null ? " (" + property.getOrigin() + ")" : "")
					+ (nearest != null ? ": did you mean " + nearest + "?" : ""));
			suggestions.add(nearest != null ? "rename " + name + " to " + nearest : "remove " + name);
		}
		String reason = (lines.size() == 1 ? "unknown RDMA property " : "unknown RDMA properties ")
				+ String.join("; ", lines);
		return new RdmaConfigurationException(first, reason,
				"The starter owns the rdma.* namespace and refuses keys it does not know, so that a typo does not"
						+ " silently leave a default in place: " + String.join(", ", suggestions)
						+ ". The properties are listed in docs/configuration.md and the configuration metadata.");
	}

}
