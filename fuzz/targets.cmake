# The libFuzzer targets: fuzz/<name>.cc builds fuzz_<name>, seeded from fuzz/corpus/<name>/.
# Read by fuzz/CMakeLists.txt (which builds them) and the main build (tests, artifacts).
set(BRAID_FUZZ_TARGETS bootstrap_wire tcp_wire ucx_wire topology_file checkpoint bench_args)
