package dev.rdma.verbs;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The teardown order across owners, without a device, on stand-in native objects that
 * destroy nothing: the shape of a context whose PD has a parent domain with a QP on it
 * (rxe refuses parent domains, so a device test cannot build it). The QP is a dependant
 * of the parent domain, which is a dependant of the PD; the CQ it uses is the context's
 * and refuses to be destroyed while the QP is open, as {@code ibv_destroy_cq} does with
 * EBUSY. {@link Context#closeDependants()} closes through
 * {@link NativeObject#closeAllDependants}, exercised here.
 */
class DependantOrderTest {

	/** The order in which the stand-ins were destroyed. */
	final List<String> destroyed = new ArrayList<>();

	class Node extends NativeObject {

		final String name;

		Node(String name, NativeObject owner) {
			super(MemorySegment.NULL, owner);
			this.name = name;
		}

		@Override
		void destroy() {
			destroyed.add(name);
		}

	}

	class Qp extends Node {

		Qp(String name, NativeObject owner) {
			super(name, owner);
		}

	}

	class Cq extends Node {

		final List<Qp> users = new ArrayList<>();

		Cq(String name, NativeObject owner) {
			super(name, owner);
		}

		@Override
		void destroy() {
			if (users.stream().anyMatch(q -> !q.isClosed())) {
				throw new VerbsException("ibv_destroy_cq", Errno.EBUSY, name + " is still used by a QP");
			}
			super.destroy();
		}

	}

	/** A context: every QP, then every CQ, then the rest. */
	class Root extends Node {

		Root() {
			super("context", null);
		}

		@Override
		void closeDependants() {
			closeAllDependants(Qp.class, Cq.class);
			super.closeDependants();
		}

	}

	@Test
	void theQpOfAParentDomainIsClosedBeforeTheCqItUses() {
		Root context = new Root();
		Cq cq = new Cq("cq", context);
		Node pd = new Node("pd", context);
		Node parentDomain = new Node("parent domain", pd);
		Qp plainQp = new Qp("qp of the pd", pd);
		Qp nestedQp = new Qp("qp of the parent domain", parentDomain);
		cq.users.add(plainQp);
		cq.users.add(nestedQp);

		assertThat(context.allDependants(Qp.class)).containsExactly(plainQp, nestedQp);
		context.close();

		assertThat(destroyed).as("teardown order").hasSize(6);
		assertThat(destroyed.indexOf("cq")).isGreaterThan(destroyed.indexOf("qp of the parent domain"))
			.isGreaterThan(destroyed.indexOf("qp of the pd"));
		assertThat(destroyed.indexOf("parent domain")).isLessThan(destroyed.indexOf("pd"));
		assertThat(destroyed.getLast()).isEqualTo("context");
		assertThat(List.of(context, cq, pd, parentDomain, plainQp, nestedQp)).allMatch(NativeObject::isClosed);
	}

}
