# smelt: the two commands of the quick start are `make demo` and `make test`.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test test-asan bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

configure: deps $(BUILD)/build.ninja

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@./$(BUILD)/smelt demo

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

clean:
	@rm -rf $(BUILD) build-asan
