"""The dashboard, rendered by headless Chromium: the charts have data, the numbers are filled in,
and the screenshot is a real picture (set LARDER_DASHBOARD_SCREENSHOT=path to keep a copy)."""

import http.client
import json
import os
import re
import shutil
import struct
import subprocess
import time
import zlib

import pytest

from helpers import proxy_exchange, wait_until
from test_admin import ADMIN, admin
from test_cache import script


def chromium():
    for name in ("chromium", "chromium-browser", "/usr/lib/chromium/chromium"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium is needed (Debian package chromium; scripts/install-deps.sh installs it)")


def run_chromium(args, timeout=90):
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--window-size=1280,1000", "--virtual-time-budget=4000", *args]
    return subprocess.run(cmd, capture_output=True, timeout=timeout)


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def history_points(lr):
    return json.loads(admin(lr, "GET", "/stats/history")[2])["points"]


def let_history_grow(lr, points, traffic=None):
    """Moves the proxy's clock a history interval at a time until the history holds ``points``
    points (on a test clock a sample is taken once the clock passes the next sample's time, within
    50 ms; a point needs two samples, so the first move adds none). ``traffic()``, when given, is
    called in each interval."""
    interval = json.loads(admin(lr, "GET", "/stats/history")[2])["interval"]
    deadline = time.monotonic() + 30
    first = True
    while len(history_points(lr)) < points and time.monotonic() < deadline:
        have = len(history_points(lr))
        if traffic is not None:
            traffic()
        lr.clock.advance(interval)
        if first and have == 0:
            # The first sample shows in no point: two sampling turns for it to be taken (should it
            # take longer, the next move is seen to add no point, and the one after adds it).
            time.sleep(0.1)
            first = False
            continue
        wait_until(lambda: len(history_points(lr)) > have, timeout=0.3, interval=0.02)
    return history_points(lr)


def test_dashboard_renders_live_charts(larder_factory, origin, workdir, proxy_clock):
    lr = larder_factory(config=ADMIN)
    script(workdir, "dash", headers=[("Cache-Control", "max-age=600")], body="d" * 2000)
    # Traffic in every interval of the history: mostly hits, some misses and a 404.
    sent = [0]

    def traffic():
        for _ in range(4):
            i = sent[0]
            for _ in range(3):
                proxy_exchange(lr.port, "GET", origin.url("/res/dash"))
            proxy_exchange(lr.port, "GET", origin.url(f"/bytes/{100 + i}"))
            if i % 3 == 0:
                proxy_exchange(lr.port, "GET", origin.url("/status/404"))
            sent[0] += 1

    check_dashboard(lr, workdir, traffic)


def check_dashboard(lr, workdir, traffic=None):
    points = let_history_grow(lr, 4, traffic)
    assert len(points) >= 4, points
    url = f"http://127.0.0.1:{lr.admin_port}/"
    assert "text/html" in admin(lr, "GET", "/")[1]["content-type"]

    dom = run_chromium(["--dump-dom", url]).stdout.decode()
    # The rendered paths (the page's script, also in the DOM, spells them with ${...}).
    lines = [d for d in re.findall(r'<path class="line" d="([^"]*)"', dom) if "$" not in d]
    assert len(lines) == 2, dom[:2000]
    for d in lines:
        assert d.count("L") >= 2, d  # at least three points on each chart
    assert re.search(r'id="k-hit">\d+\.\d%<', dom), "hit ratio tile empty"
    assert "127.0.0.1" in dom.split('id="hosts"')[1][:2000], "top hosts table empty"
    assert 'class="live ok"' in dom

    shot = workdir / "dashboard.png"
    run_chromium([f"--screenshot={shot}", url])
    assert shot.exists() and shot.stat().st_size > 20_000
    width, height, bpp, rows = png_pixels(shot)
    assert (width, height) == (1280, 1000)
    # The requests/s chart (upper left, under the tiles) is drawn in the accent colour.
    chart = rows[230:420]
    accent = sum(1 for row in chart for x in range(60, 620)
                 if abs(row[x * bpp] - 0x4f) < 24 and abs(row[x * bpp + 1] - 0xb3) < 24 and abs(row[x * bpp + 2] - 0xff) < 24)
    assert accent > 200, f"only {accent} chart-line pixels in the requests/s chart"
    colours = {row[x * bpp:x * bpp + 3] for row in rows[::7] for x in range(0, width, 7)}
    assert len(colours) > 40, "the screenshot is nearly uniform"
    keep = os.environ.get("LARDER_DASHBOARD_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def rendered_lines(dom):
    """The d of each chart's line, by chart id (the page's script, also in the DOM, spells its
    paths with ${...})."""
    out = {}
    for chart in ("chart-rps", "chart-hit"):
        svg = dom.split(f'id="{chart}"')[1].split("</svg>")[0]
        out[chart] = [d for d in re.findall(r'<path class="line" d="([^"]*)"', svg) if "$" not in d]
    return out


def test_an_idle_dashboard_labels_small_rates_and_leaves_the_hit_ratio_empty(larder_factory, proxy_clock):
    lr = larder_factory(config=ADMIN)
    assert len(let_history_grow(lr, 3)) >= 3
    dom = run_chromium(["--dump-dom", f"http://127.0.0.1:{lr.admin_port}/"]).stdout.decode()
    rps = dom.split('id="chart-rps"')[1].split("</svg>")[0]
    labels = re.findall(r'<text class="label" x="2" y="[^"]*">([^<]*)</text>', rps)
    assert labels == ["0", "0.5", "1"], labels
    # No traffic: a rate of zero is drawn, but there is no hit ratio to draw, and the chart says so.
    lines = rendered_lines(dom)
    assert lines["chart-rps"][0].count("L") >= 2 and lines["chart-hit"] == [""], lines
    assert "no cacheable requests in this span" in dom.split('id="chart-hit"')[1].split("</svg>")[0]


def grow_history(lr, steps):
    """One history interval per step, each after its traffic (a function, or None for an idle
    interval); returns the points, oldest first. Starts once the history has a point, so every
    step's interval is a point of its own."""
    interval = json.loads(admin(lr, "GET", "/stats/history")[2])["interval"]
    deadline = time.monotonic() + 30
    while not history_points(lr) and time.monotonic() < deadline:
        lr.clock.advance(interval)
        wait_until(lambda: history_points(lr), timeout=0.3, interval=0.02)
    for traffic in steps:
        have = len(history_points(lr))
        if traffic is not None:
            traffic()
        lr.clock.advance(interval)
        assert wait_until(lambda: len(history_points(lr)) > have, timeout=5, interval=0.02), "no new history point"
    return history_points(lr)


def test_idle_intervals_are_gaps_in_the_hit_ratio_chart(larder_factory, origin, workdir, proxy_clock):
    # A mirror of an upstream nobody asks for (nothing contacts it).
    lr = larder_factory(config={**ADMIN, "cache": {"presets": ["pypi", "npm"]},
                                "mirrors": [{"name": "tools", "path": "/tools/", "upstream": "https://127.0.0.1:9/tools/"}]})
    script(workdir, "gap", headers=[("Cache-Control", "max-age=600")], body="g")

    def busy():
        for _ in range(3):
            assert proxy_exchange(lr.port, "GET", origin.url("/res/gap")).status == 200

    points = grow_history(lr, [busy, busy, None, None, busy, busy])
    ratios = [p["hit_ratio"] for p in points[-6:]]
    # No requests, no hit ratio: null, not the last value carried on.
    assert [r is None for r in ratios] == [False, False, True, True, False, False], points
    assert [p["rps"] for p in points[-4:-2]] == [0, 0], points

    dom = run_chromium(["--dump-dom", f"http://127.0.0.1:{lr.admin_port}/"]).stdout.decode()
    lines = rendered_lines(dom)
    # Two runs of the hit ratio, the gap between them; the request rate is one line through zero.
    [hit] = lines["chart-hit"]
    assert hit.count("M") == 2 and hit.count("L") >= 2, hit
    [rps] = lines["chart-rps"]
    assert rps.count("M") == 1 and rps.count("L") >= 6, rps

    # The origin connections tile says what it counts; the top hosts carry their hit ratio; the
    # presets in force are named.
    assert "Origin connections</h2>" in dom and re.search(r'id="k-errors">\d+ idle · \d+ errors<', dom), dom[:3000]
    hosts = dom.split('id="hosts"')[1].split("</table>")[0]
    host = origin.url("")[len("http://"):]
    row = hosts.split(host)[1].split("</tr>")[0]
    assert re.findall(r'<td class="n"[^>]*>([^<]*)</td>', row) == ["12", "91.7%"], row  # 11 hits of 12 lookups
    serving = dom.split('id="serving"')[1].split("</section>")[0]
    rows = re.findall(r'<span class="what">([^<]*)</span>(.*?)</div>', serving)
    chips = {what: re.findall(r'<span class="chip">([^<]*)</span>', items) for what, items in rows}
    assert chips == {"Presets": ["pypi", "npm"], "Mirrors": ["tools · /tools/ → https://127.0.0.1:9/tools/"]}, serving


def test_the_warming_panel_and_an_ephemeral_cache_render(larder_factory, origin):
    lr = larder_factory(config=ADMIN, args=["--ephemeral"])
    body = "\n".join(origin.url(f"/unique/{i}/500") for i in range(12)) + "\nftp://nope/\n"
    assert admin_post(lr, "/warm", body.encode()) == 202
    deadline = time.monotonic() + 20
    while json.loads(admin(lr, "GET", "/warm")[2])["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    dom = run_chromium(["--dump-dom", f"http://127.0.0.1:{lr.admin_port}/"]).stdout.decode()
    warm = dom.split('id="warm"')[1][:3000]
    assert "job 1 · finished" in warm and "13 of 13" in warm and "stored 12" in warm and "failed 1" in warm, warm
    assert "not an http:// or https:// URL" in warm
    assert "in memory only (ephemeral)" in dom
    tiers = dom.split('id="tiers"')[1][:2000]
    assert "Memory tier" in tiers and "Disk tier" not in tiers and "nothing is written to disk" in tiers


def admin_post(lr, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", lr.admin_port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "text/uri-list"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()
