package dev.rdma.spring.boot.autoconfigure;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

import org.springframework.context.annotation.Bean;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.config.RdmaListenerContainerCustomizer;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.WcExFlag;
import dev.rdma.verbs.WorkCompletion;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * README.md's listener code: the classes its snippets import exist, and the snippets
 * themselves (below, as the README shows them) compile with the tests.
 */
class ReadmeTests {

	@Test
	void everyClassTheReadmeImportsExists() throws IOException {
		String readme = Files.readString(Path.of("..", "README.md"));
		Matcher block = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(readme);
		List<String> imports = new ArrayList<>();
		while (block.find()) {
			Matcher imported = Pattern.compile("^import ([\\w.]+);$", Pattern.MULTILINE).matcher(block.group(1));
			while (imported.find()) {
				imports.add(imported.group(1));
			}
		}
		assertThat(imports).contains("dev.rdma.spring.annotation.RdmaCompletionListener",
				"dev.rdma.spring.config.RdmaListenerContainerCustomizer");
		assertThat(imports).allSatisfy(name -> assertThat(Class.forName(name)).isNotNull());
		assertThat(readme).doesNotContain("dev.rdma.spring.boot.autoconfigure.listener");
	}

	/** The README's listener and customizer snippets. */
	static class Snippets {

		@RdmaCompletionListener(queue = "rx", fields = { WcExFlag.BYTE_LEN, WcExFlag.IMM })
		void onCompletion(WorkCompletion wc) { // one call per completion
			if (wc.isSuccess()) {
				handle(wc.wrId(), wc.byteLen(), wc.immData());
			}
		}

		@RdmaCompletionListener(queue = "tx", batch = true)
		void onBatch(CompletionBatch batch) { // one call per poll, batch.get(i) for i <
												// batch.size()
		}

		@Bean
		RdmaListenerContainerCustomizer largerRxBatches() {
			return container -> {
				if (container.queue().equals("rx")) {
					container.getSettings().setBatchSize(128); // also: setMode, setSpin,
																// setAckBatch,
																// setErrorHandler
				}
			};
		}

		void handle(long wrId, int byteLen, int immData) {
		}

	}

	/** The README's "Running with and without RDMA" snippet. */
	@org.springframework.stereotype.Component
	static class Transport {

		private final dev.rdma.verbs.Context nic0; // null without RDMA

		Transport(org.springframework.beans.factory.ObjectProvider<dev.rdma.verbs.Context> nic0, RdmaStatus status) {
			this.nic0 = nic0.getIfAvailable();
			if (this.nic0 == null) {
				System.out.println("RDMA off, using TCP: " + status.reason());
			}
		}

	}

}
