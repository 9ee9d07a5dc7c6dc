#!/usr/bin/env bash
# A first pass-through figure: wrk against an nginx origin directly, then through Larder
# (absolute-form requests, nothing cached), interleaved. Prints requests/s and the ratio.
# Usage: Benchmarks/quick-passthrough.sh [seconds-per-run] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
conns=${2:-64}
for p in wrk nginx; do
    command -v $p >/dev/null || command -v /usr/sbin/$p >/dev/null || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light >/dev/null; }
done
[ -x .build/release/larder ] || swift build -c release --product larder
work=$(mktemp -d /tmp/larder-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
origin_port=$(free_port)
mkdir -p "$work/www"
head -c 1024 /dev/urandom > "$work/www/1k"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$origin_port; root $work/www; add_header Cache-Control no-store; }
}
NGINX
taskset -c 0 /usr/sbin/nginx -c "$work/nginx.conf" & pids+=($!)
.build/release/larder --listen 127.0.0.1:0 --admin-listen off --cache-dir "$work/cache" --workers 1 \
    2> "$work/larder.log" & pids+=($!)
larder_pid=$!
taskset -p -c 0 "$larder_pid" >/dev/null
for _ in $(seq 100); do grep -q "proxy listening" "$work/larder.log" 2>/dev/null && break; sleep 0.1; done
proxy_port=$(grep -o 'proxy listening on 127.0.0.1:[0-9]*' "$work/larder.log" | head -1 | sed 's/.*://')
cat > "$work/proxy.lua" <<LUA
request = function() return wrk.format("GET", "http://127.0.0.1:$origin_port/1k") end
LUA
rps() { awk '/Requests\/sec/ {print $2}'; }
echo "load: $(cat /proc/loadavg)"
direct=(); proxied=()
for round in 1 2; do
    direct+=($(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$origin_port/1k" | rps))
    proxied+=($(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s "$work/proxy.lua" "http://127.0.0.1:$proxy_port/" | rps))
done
printf 'origin-direct req/s: %s\nthrough larder req/s: %s\n' "${direct[*]}" "${proxied[*]}"
python3 - "${direct[@]}" "${proxied[@]}" <<PY
import statistics, sys
v = list(map(float, sys.argv[1:])); n = len(v) // 2
d, p = statistics.median(v[:n]), statistics.median(v[n:])
print(f"median direct {d:.0f} req/s, through larder {p:.0f} req/s, ratio {p/d:.2f}")
PY
