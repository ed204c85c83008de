package dev.rdma.verbs.cm;

import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.RdmaUnavailableException;

/**
 * Run in a child JVM by {@link ConnectionManagerHostTest} with
 * {@code -Ddev.rdma.verbs.rdmacm.library=<a file that does not exist>}: prints what the
 * binding does without librdmacm, one {@code key=value} per line.
 */
public final class MissingLibrdmacmProbe {

	private MissingLibrdmacmProbe() {
	}

	public static void main(String[] args) {
		System.out.println("cm.available=" + EventChannel.isAvailable());
		try (EventChannel c = EventChannel.create()) {
			System.out.println("cm.create=created " + c);
		}
		catch (RdmaUnavailableException e) {
			System.out.println("cm.create=" + e.getClass().getSimpleName() + ": " + e.getMessage());
		}
		System.out.println("verbs.available=" + Rdma.isAvailable());
		try (DeviceList list = DeviceList.open()) {
			System.out.println("verbs.devices=" + list.devices().size());
		}
		catch (RuntimeException e) {
			System.out.println("verbs.devices=" + e.getClass().getSimpleName() + ": " + e.getMessage());
		}
	}

}
