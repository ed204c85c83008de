package dev.rdma.spring.connection.support;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;

import dev.rdma.verbs.Gid;
import dev.rdma.verbs.exchange.Endpoint;
import dev.rdma.verbs.exchange.ExchangeException;
import dev.rdma.verbs.exchange.PingpongWire;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Randomized inputs from the wire (jqwik): rdma_cm private data as a server reads it
 * ({@link RemoteRegion#problem}, {@link RemoteRegion#parse}) and the out-of-band endpoint
 * record ({@link PingpongWire#decode}). Each parser either takes the input or refuses it
 * with its own exception, never anything else, and what it takes is within bounds. The
 * number of tries is fixed per property, and jqwik prints each property's seed (the
 * report lines {@code tries}, {@code seed}); a failure reproduces with that seed.
 */
class HostileInputPropertyTests {

	private static final AtomicLong PRIVATE_DATA = new AtomicLong();

	private static final AtomicLong RECORDS = new AtomicLong();

	@AfterContainer
	static void report() {
		System.out.println("HostileInputPropertyTests: private data inputs " + PRIVATE_DATA.get()
				+ ", out-of-band records " + RECORDS.get());
	}

	@Property(tries = 2000, shrinking = ShrinkingMode.BOUNDED)
	void anyPrivateDataIsTakenOrRefusedNeverThrows(@ForAll @Size(max = 64) byte[] data) {
		PRIVATE_DATA.incrementAndGet();
		String problem = RemoteRegion.problem(data);
		RemoteRegion region = RemoteRegion.parse(data);
		if (problem == null && region != null) {
			assertThat(region.length()).isBetween(1L, RemoteRegion.MAX_LENGTH);
			assertThat(Long.compareUnsigned(region.address() + region.length(), region.address())).isPositive();
		}
		if (data.length > RemoteRegion.MAX_REQUEST_PRIVATE_DATA) {
			assertThat(problem).isNotNull();
		}
	}

	@Property(tries = 2000, shrinking = ShrinkingMode.BOUNDED)
	void regionRecordsWithAnyFieldsAreCheckedField(@ForAll("records") byte[] data) {
		PRIVATE_DATA.incrementAndGet();
		ByteBuffer in = ByteBuffer.wrap(data);
		long address = in.getLong(8);
		long length = in.getLong(20);
		boolean valid = data[7] == '1' && length > 0 && length <= RemoteRegion.MAX_LENGTH
				&& Long.compareUnsigned(address + length, address) >= 0;
		String problem = RemoteRegion.problem(data);
		assertThat(problem == null).as("%s: %s", Arrays.toString(data), problem).isEqualTo(valid);
		if (valid) {
			RemoteRegion region = RemoteRegion.parse(data);
			assertThat(region).isNotNull();
			assertThat(region.address()).isEqualTo(address);
			assertThat(region.length()).isEqualTo(length);
		}
	}

	@Provide
	Arbitrary<byte[]> records() {
		Arbitrary<Long> addresses = Arbitraries.oneOf(Arbitraries.longs(), Arbitraries.of(-1L, -4096L, 0L, 1L << 47));
		Arbitrary<Long> lengths = Arbitraries.oneOf(Arbitraries.longs(),
				Arbitraries.longs().between(-2, RemoteRegion.MAX_LENGTH + 2), Arbitraries.of(Long.MIN_VALUE, 0L));
		Arbitrary<Byte> versions = Arbitraries.of((byte) '1', (byte) '1', (byte) '2', (byte) 0, (byte) 0xff);
		Arbitrary<Integer> sizes = Arbitraries.integers().between(RemoteRegion.ENCODED_LENGTH, 56);
		return Combinators.combine(addresses, Arbitraries.integers(), lengths, versions, sizes)
			.as((address, rkey, length, version, size) -> {
				byte[] out = Arrays.copyOf(new RemoteRegion(1, rkey, 1).encode(), size);
				out[7] = version;
				ByteBuffer.wrap(out).putLong(8, address).putLong(20, length);
				return out;
			});
	}

	@Property(tries = 2000, shrinking = ShrinkingMode.BOUNDED)
	void anyOutOfBandBytesAreARecordOrAnExchangeException(@ForAll("wire") byte[] message) {
		RECORDS.incrementAndGet();
		Endpoint e;
		try {
			e = PingpongWire.decode(message);
		}
		catch (ExchangeException ex) {
			assertThat(ex.getMessage()).startsWith("not an endpoint record");
			assertThat(ex.getMessage().length()).as("bounded message").isLessThan(400);
			return;
		}
		assertThat(message).hasSize(PingpongWire.MESSAGE_BYTES);
		assertThat(e.lid()).isBetween(0, 0xffff);
		assertThat(e.qpn()).isBetween(0, 0xffffff);
		assertThat(e.psn()).isBetween(0, 0xffffff);
		assertThat(PingpongWire.encode(e)).as("a record taken is re-encoded to the same bytes, case aside")
			.isEqualTo(
					new String(message, StandardCharsets.US_ASCII).toLowerCase().getBytes(StandardCharsets.US_ASCII));
	}

	/**
	 * Bytes as a hostile peer writes them: random, of a record's length, or a valid
	 * record with a few bytes changed, truncated or extended.
	 */
	@Provide
	Arbitrary<byte[]> wire() {
		Arbitrary<byte[]> valid = Combinators
			.combine(Arbitraries.integers().between(0, 0xffff), Arbitraries.integers().between(0, 0xffffff),
					Arbitraries.integers().between(0, 0xffffff), Arbitraries.bytes().array(byte[].class).ofSize(16))
			.as((lid, qpn, psn, gid) -> PingpongWire.encode(new Endpoint(lid, qpn, psn, new Gid(gid), 1024)));
		Arbitrary<byte[]> mutated = Combinators
			.combine(valid, Arbitraries.integers().between(0, 51), Arbitraries.bytes(),
					Arbitraries.integers().between(-52, 60))
			.as((record, at, b, resize) -> {
				byte[] out = record.clone();
				out[at] = b;
				return (resize > 0) ? Arrays.copyOf(out, 52 + resize % 8)
						: (resize < -40) ? Arrays.copyOf(out, 52 + resize + 40) : out;
			});
		return Arbitraries.oneOf(valid, mutated, Arbitraries.bytes().array(byte[].class).ofMaxSize(80),
				Arbitraries.bytes().array(byte[].class).ofSize(52),
				Arbitraries.bytes().between((byte) '0', (byte) ':').array(byte[].class).ofSize(52));
	}

}
