#!/bin/sh
# The image's entry point: publish the admin endpoint only with a token, then become larder.
set -eu
if [ -z "${LARDER_ADMIN_LISTEN:-}" ]; then
    if [ -n "${LARDER_ADMIN_TOKEN:-}" ]; then
        LARDER_ADMIN_LISTEN=0.0.0.0:9090
    else
        LARDER_ADMIN_LISTEN=127.0.0.1:9090
        echo "larder: admin endpoint on 127.0.0.1:9090 inside the container only;" \
             "set LARDER_ADMIN_TOKEN to publish it on port 9090" >&2
    fi
    export LARDER_ADMIN_LISTEN
fi
# LARDER_BIN: another binary (the test suite runs this script outside the image); not a setting.
bin="${LARDER_BIN:-/usr/local/bin/larder}"
unset LARDER_BIN
exec "$bin" "$@"
