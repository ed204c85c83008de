package dev.rdma.spring.listener;

import java.lang.invoke.CallSite;
import java.lang.invoke.LambdaMetafactory;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;

/**
 * A listener method bound once to its bean: a class generated with
 * {@link LambdaMetafactory} that calls the method directly, or, when the method's class
 * cannot be reached that way, a {@link MethodHandle} invoked exactly. Never reflection
 * per call.
 */
@FunctionalInterface
public interface ListenerInvoker {

	void invoke(Object argument) throws Throwable;

	/**
	 * Called by the poller after a poll that handed this invoker at least one completion
	 * one by one, outside the poll (the provider's CQ lock released): the place to post,
	 * as one chain, what the completions of the batch gave back. Nothing by default.
	 */
	default void batchEnded() throws Throwable {
	}

	/** Binds {@code method} (one parameter, instance method) to {@code bean}. */
	static ListenerInvoker bind(Object bean, Method method) {
		Class<?> owner = method.getDeclaringClass();
		MethodHandles.Lookup lookup;
		MethodHandle target;
		try {
			lookup = MethodHandles.privateLookupIn(owner, MethodHandles.lookup());
			target = lookup.unreflect(method);
		}
		catch (IllegalAccessException ex) {
			try {
				method.setAccessible(true);
				lookup = null;
				target = MethodHandles.lookup().unreflect(method);
			}
			catch (IllegalAccessException | RuntimeException again) {
				throw new IllegalStateException("cannot access " + method, again);
			}
		}
		if (lookup != null && !Modifier.isStatic(method.getModifiers()) && lookup.hasFullPrivilegeAccess()) {
			try {
				CallSite site = LambdaMetafactory.metafactory(lookup, "invoke",
						MethodType.methodType(ListenerInvoker.class, owner),
						MethodType.methodType(void.class, Object.class), target,
						MethodType.methodType(void.class, method.getParameterTypes()[0]));
				return (ListenerInvoker) site.getTarget().invoke(bean);
			}
			catch (Throwable ex) {
				// fall back to a method handle (e.g. the class loader cannot see this
				// interface)
			}
		}
		MethodHandle bound = target.bindTo(bean).asType(MethodType.methodType(void.class, Object.class));
		return new HandleInvoker(bound);
	}

	/** The fallback: one exact method-handle call per invocation. */
	final class HandleInvoker implements ListenerInvoker {

		private final MethodHandle handle;

		HandleInvoker(MethodHandle handle) {
			this.handle = handle;
		}

		@Override
		public void invoke(Object argument) throws Throwable {
			handle.invokeExact(argument);
		}

	}

}
