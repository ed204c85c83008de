/**
 * The Spring-free binding of libibverbs and libefa through {@code java.lang.foreign}.
 *
 * <p>{@code dev.rdma.verbs} is the public API: devices, contexts, completion channels and queues, work completions,
 * protection domains, memory regions and queue pairs. {@code dev.rdma.verbs.ffm} holds the FFM plumbing - one class
 * per native library ({@code Ibverbs}, {@code Efa}, {@code Libc}), the hand-written struct layouts
 * ({@code Layouts}) and the shared linker helpers ({@code Native}) - and is not exported: nothing outside this module
 * calls a native function or reads a native struct directly. {@code dev.rdma.verbs.efa} is
 * the EFA provider (its CQ, flags and completion fields), exported, depending on the API and
 * never the other way. {@code dev.rdma.verbs.seam} is the benchmarks' way in to package-private
 * parts of the API (through {@code MethodHandles.privateLookupIn}), exported to them only.
 *
 * <p>Applications usually run this module on the class path (Spring Boot does); the module name then only matters
 * for {@code --enable-native-access}: {@code ALL-UNNAMED} on the class path, {@code dev.rdma.verbs} on the module
 * path.
 */
// "module": the qualified export's target, the benchmarks, is built after this module
@SuppressWarnings("module")
module dev.rdma.verbs {
    requires static transitive org.jspecify;

    exports dev.rdma.verbs;
    exports dev.rdma.verbs.efa;
    // the benchmarks' seam (package-private constructors and fields reached with
    // privateLookupIn): for them only
    exports dev.rdma.verbs.seam to dev.rdma.benchmarks;
}
