# smelt: the two commands of the quick start are `make demo` and `make test`.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo demo-dp test test-asan bench bench-threads bench-dp fuzz-build fuzz-smoke fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

configure: deps $(BUILD)/build.ninja

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The demo needs the library and the command-line program only, not the tests.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target smelt_cli
	@./$(BUILD)/smelt demo

# Data-parallel training of the demo's CNN on 2 processes (mpirun), then on 1: the same accuracy.
demo-dp: configure
	@cmake --build $(BUILD) -j $(JOBS) --target train_digits_ddp
	@bash scripts/mpirun.sh 2 ./$(BUILD)/examples/train_digits_ddp --out $(BUILD)/demo-dp
	@bash scripts/mpirun.sh 1 ./$(BUILD)/examples/train_digits_ddp --out $(BUILD)/demo-dp-1

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer + UBSan, in its own build directory.
test-asan: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMELT_SANITIZE=ON -DSMELT_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -LE "consumer|memory"

# smelt against PyTorch and this machine's limits (bench/README.md); QUICK=1 for a short run.
bench: build
	@bash scripts/install-deps.sh bench
	@/usr/bin/python3 bench/run.py --build-dir $(BUILD) $(if $(filter-out 0,$(QUICK)),--quick)

# The model zoo at 1 thread and at all of them, smelt's scaling beside ONNX Runtime's (bench/README.md).
bench-threads: build
	@bash scripts/install-deps.sh bench
	@/usr/bin/python3 bench/thread_scaling.py --build-dir $(BUILD) $(if $(filter-out 0,$(QUICK)),--quick)

# Data-parallel training steps on 1 and 2 ranks, one thread each (bench/README.md).
bench-dp: configure
	@cmake --build $(BUILD) -j $(JOBS) --target smelt_ddp_bench
	@bash scripts/mpirun.sh 1 ./$(BUILD)/bench/smelt_ddp_bench $(if $(filter-out 0,$(QUICK)),--quick)
	@bash scripts/mpirun.sh 2 ./$(BUILD)/bench/smelt_ddp_bench $(if $(filter-out 0,$(QUICK)),--quick) | tail -n +3

# libFuzzer targets (fuzz_targets/README.md): clang++ with ASan + UBSan, in build-fuzz/; -O1 with
# line tables only, as fuzzing builds usually are (crashes still name file and line, and the
# library, which CI builds a second time here, compiles faster than at -O2 -g). The smoke run
# (CI: 3000 inputs per target, seconds of running) builds at -O0, a third of -O1's compile time
# (kernels/reduce.cpp 16.4 -> 5.1 s); `make fuzz` rebuilds at -O1 for its long runs.
FUZZ_OPT ?= -O1
fuzz-build:
	@bash scripts/install-deps.sh fuzz
	@cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(FUZZ_OPT) -gline-tables-only -DNDEBUG" -DCMAKE_CXX_COMPILER=clang++ -DSMELT_LIBFUZZER=ON -DSMELT_BUILD_TESTS=OFF -DSMELT_BUILD_BENCH=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_targets

# A few thousand inputs per target (CI).
fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz-build FUZZ_OPT=-O0
	@bash fuzz_targets/run.sh smoke

# A long run: make fuzz FUZZ_SECONDS=3600 TARGETS="safetensors"
FUZZ_SECONDS ?= 600
TARGETS ?=
fuzz: fuzz-build
	@bash fuzz_targets/run.sh long $(FUZZ_SECONDS) $(TARGETS)

clean:
	@rm -rf $(BUILD) build-asan build-fuzz
