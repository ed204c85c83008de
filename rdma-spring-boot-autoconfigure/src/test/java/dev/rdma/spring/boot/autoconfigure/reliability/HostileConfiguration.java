package dev.rdma.spring.boot.autoconfigure.reliability;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.Environment;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.io.support.SpringFactoriesLoader;

import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfigurations;
import dev.rdma.verbs.NativeObjects;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A seeded generator of hostile {@code rdma.*} property sets (wrong types, negative and
 * huge sizes, unknown devices, channels and flags, keys shared by a device, a channel and
 * a queue or taken by another bean, references to the wrong kind of resource and to
 * itself), and the check each set must pass: the context either starts, or fails with a
 * failure that one of the application's {@link FailureAnalyzer}s (from
 * {@code spring.factories}, as Spring Boot would apply them) turns into a description
 * naming an {@code rdma.} property. Nothing native stays open.
 */
final class HostileConfiguration {

	/**
	 * Keys shared by the three maps (duplicates), plus names of beans the starter itself
	 * defines.
	 */
	private static final String[] KEYS = { "nic0", "nic1", "events0", "rx", "tx", "q", "rdmaResources",
			"rdmaHealthIndicator", "meterRegistry", "[a.b]", "x" };

	private final String device;

	private final Random random;

	/**
	 * @param device a real device name on the device tier, null on the host
	 */
	HostileConfiguration(String device, long seed) {
		this.device = device;
		this.random = new Random(seed);
	}

	private String pick(String... values) {
		return values[random.nextInt(values.length)];
	}

	private String key() {
		return KEYS[random.nextInt(KEYS.length)];
	}

	private String deviceName() {
		return pick(device == null ? "rxe0" : device, device == null ? "mlx5_0" : device, "nosuchdev0", "", " ",
				"x".repeat(300), "rxe0%00", "../../etc/passwd");
	}

	private String size() {
		return pick("1", "2", "16", "64", "256", "4096", "65536", "0", "-1", "-2147483648", "2147483647", "2147483648",
				"99999999999999999999", "1e3", "0x10", "lots", "", "1.5", "1_000");
	}

	/** One random property set. */
	List<String> next() {
		List<String> props = new ArrayList<>();
		boolean sane = random.nextInt(10) < 8;
		if (sane) {
			props.add("rdma.required=true");
			props.add("rdma.devices.nic0.name=" + (device == null ? "rxe0" : device));
			props.add("rdma.channels.events0.device=nic0");
			props.add("rdma.completion-queues.rx.entries=64");
			props.add("rdma.completion-queues.rx.channel=events0");
		}
		int mutations = 1 + random.nextInt(random.nextBoolean() ? 2 : 5);
		for (int m = 0; m < mutations; m++) {
			props.add(mutation());
		}
		return props;
	}

	private String mutation() {
		String k = key();
		String dev = "rdma.devices." + k;
		String ch = "rdma.channels." + k;
		String q = "rdma.completion-queues." + k;
		return switch (random.nextInt(24)) {
			case 0 -> "rdma.required=" + pick("true", "false", "maybe", "", "1", "TRUE");
			case 1 -> "rdma.shutdown-timeout=" + pick("5s", "0", "-1s", "PT-3S", "abc", "99999999d", "1ns", "");
			case 2 -> dev + ".name=" + deviceName();
			case 3 -> dev + ".guid="
					+ pick("0x505400fffe727865", "zz", "0x", "0x" + "f".repeat(17), "::", "", "0:0:0:0", "-1");
			case 4 -> dev + ".port=" + pick("1", "0", "-1", "2", "255", "2147483647", "one", "1.5", "99999999999");
			case 5 -> ch + ".device=" + pick("nic0", "nic1", "nosuchdevice", "", key());
			case 6 -> ch + ".non-blocking=" + pick("true", "false", "yes", "2", "");
			case 7 -> q + ".device=" + pick("nic0", "nic1", "nosuchdevice", "", key());
			case 8 -> q + ".type=" + pick("legacy", "extended", "efa", "fancy", "", "LEGACY", "Extended");
			case 9, 10 -> q + ".entries=" + size();
			case 11 -> q + ".comp-vector=" + pick("auto", "0", "1", "-1", "4096", "x", "", "2147483648");
			case 12 -> q + ".channel=" + pick("events0", "nosuchchannel", k, key(), "");
			case 13 -> q + ".wc-flags=" + pick("byte-len,imm", "bogus", "", "byte-len,bogus", "completion-timestamp",
					"src-qp,slid,sl,dlid-path-bits,qp-num,imm,byte-len");
			case 14 -> q + ".flags="
					+ pick("single-threaded", "ignore-overrun", "bogus", "", "single-threaded,single-threaded");
			case 15 -> q + ".efa-wc-flags=" + pick("sgid", "unsolicited", "bogus");
			case 16 -> q + ".polling.mode=" + pick("busy", "event", "adaptive", "turbo", "", "EVENT");
			case 17 -> q + ".polling.batch-size=" + size();
			case 18 -> q + ".polling.spin=" + pick("50us", "-1ms", "forever", "10s", "0", "");
			case 19 -> q + ".ack-batch=" + size();
			case 20 -> q + ".color=" + pick("blue", "");
			case 21 -> "rdma." + pick("bogus", "devices", "channels", "completion-queues") + "=" + pick("1", "x", "");
			// reference cycles: a queue's channel is itself, a channel's device is a
			// queue, a queue's device a channel
			case 22 -> q + ".channel=" + k;
			default -> ch + ".device=" + k;
		};
	}

	// ------------------------------------------------------------------ the check

	/** What happened to the sets of one run. */
	static final class Outcomes {

		int started;

		int failed;

		final Map<String, Integer> byProperty = new TreeMap<>();

		@Override
		public String toString() {
			return "started=" + started + " failed=" + failed + " failuresByProperty=" + byProperty;
		}

	}

	static List<FailureAnalyzer> analyzers() {
		BeanFactory beanFactory = new DefaultListableBeanFactory();
		Environment environment = new StandardEnvironment();
		SpringFactoriesLoader.ArgumentResolver resolver = SpringFactoriesLoader.ArgumentResolver
			.of(BeanFactory.class, beanFactory)
			.and(Environment.class, environment);
		return SpringFactoriesLoader.forDefaultResourceLocation(HostileConfiguration.class.getClassLoader())
			.load(FailureAnalyzer.class, resolver, SpringFactoriesLoader.FailureHandler.handleMessage((m, f) -> {
			}));
	}

	/**
	 * Runs {@code sets} sets of a generator seeded with {@code seed} ({@code device}: a
	 * real device name on the device tier, null on the host), each through
	 * {@link #check}; reports them as {@code hostile-config-<tier>} and returns the
	 * outcomes, asserting that every set either started or failed.
	 */
	static Outcomes runSets(String tier, String device, long seed, int sets, List<FailureAnalyzer> analyzers) {
		HostileConfiguration generator = new HostileConfiguration(device, seed);
		Outcomes outcomes = new Outcomes();
		long start = System.nanoTime();
		for (int i = 0; i < sets; i++) {
			check(baseRunner(), generator.next(), tier + " set #" + i + " (seed " + seed + ")", analyzers, outcomes);
		}
		Reliability.report("hostile-config-" + tier, "sets", sets, "seed", seed, "durationMs",
				(System.nanoTime() - start) / 1_000_000, "outcomes", outcomes);
		assertThat(outcomes.started + outcomes.failed).isEqualTo(sets);
		return outcomes;
	}

	/** Runs one set; asserts the outcome. */
	static void check(ApplicationContextRunner base, List<String> props, String label, List<FailureAnalyzer> analyzers,
			Outcomes outcomes) {
		long open = NativeObjects.open();
		ApplicationContextRunner runner = base.withPropertyValues(props.toArray(String[]::new));
		runner.run(context -> {
			if (context.getStartupFailure() == null) {
				outcomes.started++;
				return;
			}
			outcomes.failed++;
			Throwable failure = context.getStartupFailure();
			FailureAnalysis analysis = null;
			for (FailureAnalyzer analyzer : analyzers) {
				analysis = analyzer.analyze(failure);
				if (analysis != null) {
					break;
				}
			}
			assertThat(analysis)
				.as(label + " " + props + ": no FailureAnalyzer explains\n" + Reliability.messages(failure))
				.isNotNull();
			String text = analysis.getDescription() + "\n" + analysis.getAction();
			java.util.regex.Matcher m = java.util.regex.Pattern.compile("rdma\\.[a-z-]+(\\.[^ ='\"\\n:,)]+)*")
				.matcher(text);
			assertThat(m.find()).as(label + " " + props + ": the failure analysis names no rdma property:\n" + text)
				.isTrue();
			String property = m.group().replaceAll("^(rdma\\.[a-z-]+)\\..*?((\\.[a-z-]+)*)$", "$1.*$2");
			outcomes.byProperty.merge(property, 1, Integer::sum);
		});
		assertThat(NativeObjects.open())
			.as(label + " " + props + ": native objects left open " + NativeObjects.openByType())
			.isEqualTo(open);
	}

	static ApplicationContextRunner baseRunner() {
		return new ApplicationContextRunner().withConfiguration(RdmaAutoConfigurations.all());
	}

}
