# Entry points: `make` builds, `make run` trains the default net, `make test` runs every test
# (normal and sanitizer builds). Each one installs missing Debian packages first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all setup setup-test build run test test-fast asan clean

all: build

setup:
	@bash scripts/setup.sh

# PyTorch, torchvision and ONNX for Python: test_torchvision's references (it skips without them).
setup-test:
	@bash scripts/setup.sh --test

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/vdnn train

test-fast: build setup-test
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

asan: setup setup-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DVDNN_SANITIZE=ON -DVDNN_CUDA=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1 VDNN_TEST_QUICK=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

test: test-fast asan

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
