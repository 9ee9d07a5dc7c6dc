# Conveniences over scripts/; the scripts are what the README and CI run.
.PHONY: run test build unit integration bench clean presets

run:
	bash scripts/run.sh

test:
	bash scripts/test.sh

build:
	swift build -c release --product larder

unit:
	swift test

integration: build
	LARDER_BIN=$(CURDIR)/.build/release/larder python3 -m pytest Tests/Integration -q -p no:cacheprovider

# The peer benchmark (Benchmarks/README.md): make bench, or make bench BENCH_ARGS=--quick
bench: build
	python3 Benchmarks/bench.py $(BENCH_ARGS)

# After editing Config/presets/*.yaml: the copy built into the binary (PresetTests checks it).
presets:
	python3 scripts/embed-presets.py

clean:
	rm -rf .build
