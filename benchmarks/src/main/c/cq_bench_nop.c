/*
 * libcqbench_nop.so: one empty function with the signature of a provider's poll_cq, called by cq_bench (through a
 * function pointer from dlsym) and by the Java twin (a critical downcall, as the binding calls poll_cq). The
 * difference of the two is the fixed cost of an FFM downcall on the machine the benchmark runs on
 * (docs/benchmarks-history.md, "Where the time goes").
 */
int bench_nop(void *cq, int num_entries, void *wc);

int bench_nop(void *cq, int num_entries, void *wc)
{
    (void)cq;
    (void)wc;
    return num_entries - num_entries;
}
