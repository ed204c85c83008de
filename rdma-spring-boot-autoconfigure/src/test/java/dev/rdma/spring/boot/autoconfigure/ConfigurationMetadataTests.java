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
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
 * The configuration metadata, the way Spring Boot defines it: property names are plain
 * lower-case dotted names, a map property ({@code rdma.completion-queues}) is one entry
 * of type {@code Map<String, Value>}, and hints apply to its {@code .keys} or
 * {@code .values} (the format has no {@code *} wildcard; Boot's own map-of-object
 * properties, e.g. {@code spring.security.oauth2.client.registration}, are described the
 * same way). The properties of each map value come from its class: the processor writes
 * them, from the field Javadoc, for each {@code @ConfigurationPropertiesSource} class to
 * {@code META-INF/spring/configuration-metadata/<class>.json}, where tools that know the
 * value type find them, and the map property's description lists them. The hand-written
 * {@code META-INF/additional-spring-configuration-metadata.json} holds only hints.
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

	/**
	 * What the processor derived for a class: its properties by relative name, those of
	 * its nested groups ({@code polling.mode}) included.
	 */
	private static Map<String, JSONObject> derived(String type) throws IOException, JSONException {
		Map<String, JSONObject> properties = new LinkedHashMap<>();
		JSONObject metadata = read("META-INF/spring/configuration-metadata/" + type + ".json");
		for (JSONObject property : list(metadata, "properties")) {
			properties.put(property.getString("name"), property);
		}
		for (JSONObject group : list(metadata, "groups")) {
			String prefix = group.getString("name") + ".";
			for (Map.Entry<String, JSONObject> nested : derived(group.getString("type")).entrySet()) {
				properties.put(prefix + nested.getKey(), nested.getValue());
			}
		}
		return properties;
	}

	@Test
	void namesAreBootSyntaxWithoutWildcards() throws Exception {
		for (String resource : List.of(PROCESSED, HAND_WRITTEN)) {
			for (String key : List.of("properties", "groups", "hints")) {
				for (JSONObject item : list(read(resource), key)) {
					assertThat(item.getString("name")).as(resource + " " + key)
						.matches("[a-z0-9.-]+")
						.doesNotContain("*");
				}
			}
		}
		assertThat(list(read(HAND_WRITTEN), "properties")).as("hand-written properties: the processor writes rdma.*")
			.extracting(p -> p.getString("name"))
			.containsExactly("management.health.rdma.enabled");
	}

	@Test
	void eachMapPropertyDescribesItsValuesWhoseClassMetadataComesFromTheJavadoc() throws Exception {
		JSONObject processed = read(PROCESSED);
		Map<String, String> maps = mapValueTypes(processed);
		assertThat(maps).containsOnlyKeys("rdma.devices", "rdma.channels", "rdma.completion-queues", "rdma.pollers",
				"rdma.connections");
		Map<String, String> descriptions = new LinkedHashMap<>();
		for (JSONObject property : list(processed, "properties")) {
			descriptions.put(property.getString("name"), property.optString("description", ""));
		}
		Set<String> keyHints = new TreeSet<>();
		for (JSONObject hint : list(read(HAND_WRITTEN), "hints")) {
			keyHints.add(hint.getString("name"));
		}
		for (Map.Entry<String, String> map : maps.entrySet()) {
			Map<String, JSONObject> values = derived(map.getValue());
			assertThat(values).as(map.getValue()).isNotEmpty();
			// the description names every property of a value, and no other
			String description = descriptions.get(map.getKey());
			Matcher listed = Pattern.compile("Properties of each \\w+: ([a-z., -]+)\\.$").matcher(description);
			assertThat(listed.find()).as(map.getKey() + " description lists the value's properties: " + description)
				.isTrue();
			assertThat(new TreeSet<>(Arrays.asList(listed.group(1).split(", ")))).as(map.getKey())
				.isEqualTo(new TreeSet<>(values.keySet()));
			assertThat(keyHints).as("a .keys hint for " + map.getKey()).contains(map.getKey() + ".keys");
			for (Map.Entry<String, JSONObject> value : values.entrySet()) {
				JSONObject property = value.getValue();
				String name = map.getKey() + ".<key>." + value.getKey();
				assertThat(property.optString("description", "")).as(name + " description (field Javadoc)")
					.isNotBlank()
					.doesNotContain("{@")
					.doesNotContain("<");
				if (property.has("defaultValue")) {
					assertThat(convert(property.get("defaultValue"), property.getString("type")))
						.as(name + " default against the field's initial value")
						.isEqualTo(defaultOf(map.getValue(), value.getKey()));
				}
			}
		}
		assertThat(descriptions)
			.allSatisfy((name, description) -> assertThat(description).as(name).isNotBlank().doesNotContain("{@"));
	}

	@Test
	void hintsNameMapKeysOrPropertiesAndListExactlyTheValuesTheyAccept() throws Exception {
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
			assertThat(enumType).as(name).isNotNull();
			Set<String> constants = Arrays.stream(enumType.getEnumConstants())
				.map(c -> ((Enum<?>) c).name().toLowerCase(Locale.ROOT).replace('_', '-'))
				.collect(Collectors.toCollection(TreeSet::new));
			assertThat(new TreeSet<>(values)).as("hint values of " + name).isEqualTo(constants);
		}
	}

	@Test
	void connectionExchangeIsDescribedWithItsValuesAndDefaultsToCm() throws Exception {
		Map<String, JSONObject> connection = derived(mapValueTypes(read(PROCESSED)).get("rdma.connections"));
		JSONObject exchange = connection.get("exchange");
		assertThat(exchange).as("rdma.connections.<key>.exchange").isNotNull();
		assertThat(exchange.getString("type")).endsWith("ConnectionExchange");
		assertThat(enumType(exchange.getString("type")).getEnumConstants()).hasSize(2);
		assertThat(exchange.getString("defaultValue")).isEqualTo("cm");
		assertThat(exchange.getString("description")).contains("cm (rdma_cm").contains("out-of-band (");
		assertThat(connection).containsKeys("out-of-band.port", "out-of-band.gid-index");
		assertThat(connection.get("out-of-band.gid-index").getString("description")).contains("IPv4 RoCE v2 GID");
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
	private static Object defaultOf(String type, String relative) throws Exception {
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

	@Test
	void everyDescriptionIsACompleteSentence() throws Exception {
		List<String> all = new ArrayList<>();
		List<String> resources = new ArrayList<>(List.of(PROCESSED));
		for (String type : mapValueTypes(read(PROCESSED)).values()) {
			resources.add("META-INF/spring/configuration-metadata/" + type + ".json");
		}
		for (String resource : resources) {
			JSONObject metadata = read(resource);
			for (JSONObject property : list(metadata, "properties")) {
				all.add(resource + " " + property.getString("name") + ": " + property.optString("description", ""));
			}
			for (JSONObject hint : list(metadata, "hints")) {
				JSONArray values = hint.optJSONArray("values");
				for (int i = 0; values != null && i < values.length(); i++) {
					all.add(resource + " hint " + hint.getString("name") + " "
							+ values.getJSONObject(i).optString("value") + ": "
							+ values.getJSONObject(i).optString("description", ""));
				}
			}
		}
		assertThat(all).hasSizeGreaterThan(20)
			.allSatisfy(line -> assertThat(line).as("a description that is a whole sentence")
				.endsWith(".")
				.doesNotEndWith("e.g.")
				.doesNotEndWith("i.e.")
				.doesNotEndWith(": ."));
	}

	@Test
	void healthIndicatorSwitchIsDescribedAsBootDescribesItsOwn() throws Exception {
		JSONObject enabled = list(read(PROCESSED), "properties").stream()
			.filter(p -> p.optString("name").equals("management.health.rdma.enabled"))
			.findFirst()
			.orElseThrow(() -> new AssertionError("management.health.rdma.enabled in " + PROCESSED));
		assertThat(enabled.getString("type")).isEqualTo("java.lang.Boolean");
		assertThat(enabled.getBoolean("defaultValue")).isTrue();
		assertThat(enabled.getString("description")).startsWith("Whether to enable the RDMA health check");
	}

	@Test
	void shutdownTimeoutSaysItBoundsTheConnectionsToo() throws Exception {
		JSONObject timeout = list(read(PROCESSED), "properties").stream()
			.filter(p -> p.optString("name").equals("rdma.shutdown-timeout"))
			.findFirst()
			.orElseThrow();
		assertThat(timeout.getString("description")).contains("connections").contains("pollers");
	}

}
