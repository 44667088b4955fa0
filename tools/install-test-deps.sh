#!/usr/bin/env bash
# Install what the test suite needs: the package with its test extras, and the system packages
# some tests call (promtool and the Prometheus server, from Debian's `prometheus` package, lint a real
# /metrics scrape, run the shipped rules' unit tests and query a live cluster; Debian's
# `prometheus-alertmanager` receives the alerts of the routing test;
# Debian's `chromium` and `chromium-driver` run the web console's headless browser test; `curl`
# and `jq` run the documented HTTP API examples; systemd's `systemd-analyze` verifies the shipped
# units; the package's test extras include the docs extra, so the suite builds the docs site).
# Safe to re-run: a tool already on PATH is not installed again. Without root or apt-get the
# system packages are left out with a note, and the tests that need them skip (outside CI; with
# CI=true they fail instead).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-test-deps: installing promtool (Debian package prometheus)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
        echo "install-test-deps: promtool not found; install Debian's 'prometheus' package" \
            "(apt-get install prometheus) or put promtool on PATH, else its test skips" >&2
    fi
fi

if ! command -v prometheus-alertmanager >/dev/null 2>&1 && ! command -v alertmanager >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-test-deps: installing prometheus-alertmanager (the alert routing test)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            prometheus-alertmanager >/dev/null
    else
        echo "install-test-deps: alertmanager not found; install Debian's 'prometheus-alertmanager'" \
            "package (apt-get install prometheus-alertmanager), else its test skips" >&2
    fi
fi

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-test-deps: installing chromium and chromium-driver (the console's browser test)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium chromium-driver >/dev/null
    else
        echo "install-test-deps: chromium/chromedriver not found; install Debian's 'chromium' and" \
            "'chromium-driver' packages, else the console's browser test skips" >&2
    fi
fi

if ! command -v curl >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-test-deps: installing curl and jq (the HTTP API's documented curl examples)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl jq >/dev/null
    else
        echo "install-test-deps: curl/jq not found; install Debian's 'curl' and 'jq' packages," \
            "else the test of the README's curl examples skips" >&2
    fi
fi

if ! command -v systemd-analyze >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "install-test-deps: installing systemd (systemd-analyze verifies the shipped units)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
    else
        echo "install-test-deps: systemd-analyze not found; install Debian's 'systemd' package," \
            "else the test of deploy/systemd/ skips" >&2
    fi
fi

python -m pip install -q -e '.[test]'
# An editable install compiles nothing, and with PYTHONDONTWRITEBYTECODE set (as in CI's image)
# nothing is cached at import either: every node and executor a test starts (~480 per
# run, besides the CLI calls) would compile the package from source again, ~0.45 s of CPU each.
# Bytecode compiled now is used (and checked against each source's mtime) by every process.
python -m compileall -q -j 0 raftsched
