package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;

import org.springframework.beans.BeanWrapperImpl;
import org.springframework.boot.configurationprocessor.json.JSONArray;
import org.springframework.boot.configurationprocessor.json.JSONException;
import org.springframework.boot.configurationprocessor.json.JSONObject;
import org.springframework.boot.convert.ApplicationConversionService;
import org.springframework.util.ClassUtils;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The configuration metadata: the descriptions, types and defaults come from the field
 * Javadoc and initializers through spring-boot-configuration-processor; the hand-written
 * {@code META-INF/additional-spring-configuration-metadata.json} holds only what the
 * processor cannot produce. The processor does not descend into map values
 * ({@code rdma.devices.*.name}), so their entries are hand-written, and must equal, field
 * for field, what the processor derived for their classes (written for each
 * {@code @ConfigurationPropertiesSource} class to
 * {@code META-INF/spring/configuration-metadata/<class>.json}). Fails when the two
 * disagree.
 */
class ConfigurationMetadataTests {

	private static final String PROCESSED = "META-INF/spring-configuration-metadata.json";

	private static final String HAND_WRITTEN = "META-INF/additional-spring-configuration-metadata.json";

	private static JSONObject read(String resource) throws IOException, JSONException {
		try (InputStream in = ConfigurationMetadataTests.class.getClassLoader().getResourceAsStream(resource)) {
			assertThat(in).as(resource + " on the class path").isNotNull();
			return new JSONObject(new String(in.readAllBytes(), StandardCharsets.UTF_8));
		}
	}

	private static List<JSONObject> list(JSONObject metadata, String key) throws JSONException {
		List<JSONObject> items = new ArrayList<>();
		JSONArray array = metadata.optJSONArray(key);
		for (int i = 0; array != null && i < array.length(); i++) {
			items.add(array.getJSONObject(i));
		}
		return items;
	}

	/** The map properties of the processed metadata and the class of their values. */
	private static Map<String, String> mapValueTypes(JSONObject processed) throws JSONException {
		Map<String, String> maps = new LinkedHashMap<>();
		for (JSONObject property : list(processed, "properties")) {
			String type = property.getString("type");
			if (type.startsWith("java.util.Map<java.lang.String,")) {
				maps.put(property.getString("name"),
						type.substring("java.util.Map<java.lang.String,".length(), type.length() - 1).trim());
			}
		}
		return maps;
	}

	/** What the processor derived for a class: its properties by (relative) name. */
	private static Map<String, JSONObject> derived(String type) throws IOException, JSONException {
		Map<String, JSONObject> properties = new LinkedHashMap<>();
		for (JSONObject property : list(read("META-INF/spring/configuration-metadata/" + type + ".json"),
				"properties")) {
			properties.put(property.getString("name"), property);
		}
		return properties;
	}

	@Test
	void handWrittenPropertiesAreMapValuesEqualToWhatTheProcessorDerivedFromTheJavadoc() throws Exception {
		JSONObject processed = read(PROCESSED);
		Map<String, String> maps = mapValueTypes(processed);
		assertThat(maps).containsOnlyKeys("rdma.devices", "rdma.channels", "rdma.completion-queues", "rdma.pollers");
		Set<String> handWritten = new TreeSet<>();
		for (JSONObject property : list(read(HAND_WRITTEN), "properties")) {
			String name = property.getString("name");
			handWritten.add(name);
			int star = name.indexOf(".*.");
			assertThat(star)
				.as(name + ": only the values of map properties are written by hand; the processor writes "
						+ "the others from the field Javadoc")
				.isPositive();
			String map = name.substring(0, star);
			String relative = name.substring(star + 3);
			assertThat(maps).as(name + ": " + map + " is no map property").containsKey(map);
			JSONObject derived = derived(maps.get(map)).get(relative);
			assertThat(derived).as(name + ": the processor derived no property " + relative + " for " + maps.get(map))
				.isNotNull();
			for (String field : List.of("type", "sourceType", "description")) {
				assertThat(property.optString(field, null))
					.as(name + " " + field + " (copy it from the processor's output: the field Javadoc is the source)")
					.isEqualTo(derived.optString(field, null));
			}
			Object actualDefault = defaultOf(maps.get(map), relative, derived.getString("type"));
			if (derived.has("defaultValue")) {
				assertThat(property.has("defaultValue")).as(name + " defaultValue missing").isTrue();
				assertThat(convert(derived.get("defaultValue"), derived.getString("type")))
					.as(name + " processor default")
					.isEqualTo(actualDefault);
			}
			if (property.has("defaultValue")) {
				assertThat(convert(property.get("defaultValue"), derived.getString("type")))
					.as(name + " defaultValue against the field's initial value")
					.isEqualTo(actualDefault);
			}
		}
		// every property of every map value is listed
		for (Map.Entry<String, String> map : maps.entrySet()) {
			for (String relative : derived(map.getValue()).keySet()) {
				assertThat(handWritten).as("hand-written entry for " + map.getKey() + ".*." + relative)
					.contains(map.getKey() + ".*." + relative);
			}
		}
		// and the processed (merged) metadata carries them, each with a description
		Map<String, String> descriptions = new LinkedHashMap<>();
		for (JSONObject property : list(processed, "properties")) {
			descriptions.put(property.getString("name"), property.optString("description", ""));
		}
		assertThat(descriptions.keySet()).containsAll(handWritten);
		assertThat(descriptions)
			.allSatisfy((name, description) -> assertThat(description).as(name).isNotBlank().doesNotContain("{@"));
	}

	@Test
	void hintsNamePropertiesAndListExactlyTheValuesTheyAccept() throws Exception {
		JSONObject processed = read(PROCESSED);
		Map<String, String> types = new LinkedHashMap<>();
		for (JSONObject property : list(processed, "properties")) {
			types.put(property.getString("name"), property.getString("type"));
		}
		Set<String> maps = mapValueTypes(processed).keySet();
		List<JSONObject> hints = list(read(HAND_WRITTEN), "hints");
		assertThat(hints).isNotEmpty();
		for (JSONObject hint : hints) {
			String name = hint.getString("name");
			List<String> values = new ArrayList<>();
			for (JSONObject value : list(hint, "values")) {
				values.add(value.getString("value"));
				assertThat(value.optString("description", "")).as(name + " " + value).isNotBlank();
			}
			if (name.endsWith(".keys")) {
				assertThat(maps).as(name).contains(name.substring(0, name.length() - ".keys".length()));
				continue;
			}
			assertThat(types).as("hint " + name + " names a property").containsKey(name);
			Class<?> enumType = enumType(types.get(name));
			if (enumType != null) {
				Set<String> constants = Arrays.stream(enumType.getEnumConstants())
					.map(c -> ((Enum<?>) c).name().toLowerCase(Locale.ROOT).replace('_', '-'))
					.collect(Collectors.toCollection(TreeSet::new));
				assertThat(new TreeSet<>(values)).as("hint values of " + name).isEqualTo(constants);
			}
			else {
				assertThat(name).isEqualTo("rdma.completion-queues.*.comp-vector");
				RdmaProperties.CompletionQueueProperties queue = new RdmaProperties.CompletionQueueProperties();
				for (String value : values) {
					queue.setCompVector(value);
					RdmaPropertiesValidator.compVector(name, queue); // throws for a value
																		// it does not
																		// accept
				}
			}
		}
	}

	private static Class<?> enumType(String type) {
		String element = type.startsWith("java.util.Set<")
				? type.substring("java.util.Set<".length(), type.length() - 1) : type;
		if (element.startsWith("java.")) {
			return null;
		}
		Class<?> resolved = ClassUtils.resolveClassName(element, ConfigurationMetadataTests.class.getClassLoader());
		return resolved.isEnum() ? resolved : null;
	}

	/**
	 * The initial value of {@code relative} (kebab-case, dotted) in a new instance of
	 * {@code type}.
	 */
	private static Object defaultOf(String type, String relative, String propertyType) throws Exception {
		Object instance = ClassUtils.resolveClassName(type, ConfigurationMetadataTests.class.getClassLoader())
			.getDeclaredConstructor()
			.newInstance();
		String path = Arrays.stream(relative.split("\\.")).map(part -> {
			String[] words = part.split("-");
			StringBuilder camel = new StringBuilder(words[0]);
			for (int i = 1; i < words.length; i++) {
				camel.append(Character.toUpperCase(words[i].charAt(0))).append(words[i].substring(1));
			}
			return camel.toString();
		}).collect(Collectors.joining("."));
		return new BeanWrapperImpl(instance).getPropertyValue(path);
	}

	private static Object convert(Object value, String type) {
		String name = type.startsWith("java.util.") ? "java.lang.Object" : type;
		Class<?> target = ClassUtils.resolveClassName(name, ConfigurationMetadataTests.class.getClassLoader());
		return ApplicationConversionService.getSharedInstance().convert(value, target);
	}

}
