#!/usr/bin/env bash
# Hits versus misses: wrk against an nginx origin directly, through Larder for a URL the origin
# marks no-store (every request a miss, forwarded), and through Larder for a URL with max-age
# (every request after the first a hit), interleaved. Prints requests/s and ratios.
# Usage: Benchmarks/quick-hit.sh [seconds-per-run] [connections]
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
chmod 755 "$work"  # nginx's workers run unprivileged: a private directory would make every answer a 403
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
origin_port=$(free_port)
mkdir -p "$work/www"
mkdir -p "$work/www/nostore" "$work/www/cached"
head -c 1024 /dev/urandom > "$work/www/nostore/1k"
cp "$work/www/nostore/1k" "$work/www/cached/1k"
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$origin_port; root $work/www;
        location /nostore/ { add_header Cache-Control no-store; }
        location /cached/ { add_header Cache-Control "max-age=3600"; }
    }
}
NGINX
taskset -c 0 /usr/sbin/nginx -c "$work/nginx.conf" & pids+=($!)
.build/release/larder --listen 127.0.0.1:0 --admin-listen off --access-log off --cache-dir "$work/cache" --workers 1 \
    2> "$work/larder.log" & pids+=($!)
larder_pid=$!
taskset -p -c 0 "$larder_pid" >/dev/null
for _ in $(seq 100); do grep -q "proxy listening" "$work/larder.log" 2>/dev/null && break; sleep 0.1; done
proxy_port=$(grep -o 'proxy listening on 127.0.0.1:[0-9]*' "$work/larder.log" | head -1 | sed 's/.*://')
cat > "$work/miss.lua" <<LUA
request = function() return wrk.format("GET", "http://127.0.0.1:$origin_port/nostore/1k") end
LUA
cat > "$work/hit.lua" <<LUA
request = function() return wrk.format("GET", "http://127.0.0.1:$origin_port/cached/1k") end
LUA
curl -s -o /dev/null -x "127.0.0.1:$proxy_port" "http://127.0.0.1:$origin_port/cached/1k"
# Requests/s from wrk's report; a run with any non-2xx answer or socket error measures nothing.
rps() {
    local out
    out=$(cat)
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        echo "benchmark run failed:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk '/Requests\/sec/ {print $2}' <<<"$out"
}
echo "load: $(cat /proc/loadavg)"
direct=(); miss=(); hit=()
for round in 1 2; do
    direct+=($(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$origin_port/cached/1k" | rps))
    miss+=($(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s "$work/miss.lua" "http://127.0.0.1:$proxy_port/" | rps))
    hit+=($(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s "$work/hit.lua" "http://127.0.0.1:$proxy_port/" | rps))
done
printf 'origin direct: %s\nlarder miss:   %s\nlarder hit:    %s\n' "${direct[*]}" "${miss[*]}" "${hit[*]}"
python3 - "${direct[@]}" "${miss[@]}" "${hit[@]}" <<PY
import statistics, sys
v = list(map(float, sys.argv[1:])); n = len(v) // 3
d, m, h = (statistics.median(v[i * n:(i + 1) * n]) for i in range(3))
print(f"median req/s: origin direct {d:.0f}, larder miss {m:.0f}, larder hit {h:.0f}; "
      f"hit/miss {h/m:.2f}, hit/direct {h/d:.2f}")
PY
