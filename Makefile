# Conveniences over scripts/; the scripts are what the README and CI run.
.PHONY: run test build unit integration clean

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

clean:
	rm -rf .build
