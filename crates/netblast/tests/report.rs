//! `netblast report --html` (issue 11): the page of real loopback runs, and a comparison,
//! rendered by headless Chromium (Debian's `chromium`, installed by scripts/setup.sh).

use crate::http::Responder;
use crate::util::{self, wait_output, KillOnDrop};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Chromium binary; the test fails (does not skip) without one: the report is only known to
/// render when a browser has drawn it.
fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(p) = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|d| d.join(name))
            .find(|p| p.is_file())
        {
            return p;
        }
    }
    panic!("no chromium on PATH: scripts/setup.sh installs Debian's chromium package");
}

/// Headless Chromium on `page`: its DOM after parsing, and a screenshot as (channels, width, pixels).
fn browse(page: &Path, dir: &Path) -> (String, (usize, u32, Vec<u8>)) {
    let profile = dir.join("chromium-profile");
    let url = format!("file://{}", page.display());
    let base = |c: &mut Command| {
        c.args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,4000"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(Stdio::null())
            .stderr(Stdio::null());
    };
    let mut dump = Command::new(chromium());
    base(&mut dump);
    // The DOM goes to a file: a page is larger than a pipe's buffer, and nothing reads the
    // pipe while the child is waited for.
    let dom_file = dir.join("dom.html");
    let out = std::fs::File::create(&dom_file).unwrap();
    let status = wait_output(dump.arg("--dump-dom").arg(&url).stdout(out).spawn().unwrap(), Duration::from_secs(90));
    assert!(status.status.success(), "chromium --dump-dom {url}: {:?}", status.status);
    let dom = std::fs::read_to_string(&dom_file).unwrap();
    let png = dir.join("shot.png");
    let mut shot = Command::new(chromium());
    base(&mut shot);
    let out = wait_output(
        shot.arg(format!("--screenshot={}", png.display())).arg(&url).stdout(Stdio::null()).spawn().unwrap(),
        Duration::from_secs(90),
    );
    assert!(out.status.success(), "chromium --screenshot {url}: {:?}", out.status);
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("screenshot in {other:?}: expected RGB or RGBA"),
    };
    (dom, (channels, info.width, buf))
}

/// The drawn marks inside `<figure id="ID">` of the browser's DOM: points of its lines and
/// rectangles of its bars; panics when the figure is missing or holds no SVG.
fn marks(dom: &str, id: &str) -> usize {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no figure {id} in the rendered page"));
    let fig = &dom[at..at + dom[at..].find("</figure>").unwrap()];
    assert!(fig.contains("<svg"), "{id}: no svg");
    let points: usize =
        fig.match_indices("points=\"").map(|(i, _)| fig[i + 8..].split('"').next().unwrap().split(' ').count()).sum();
    points + fig.matches("<rect").count()
}

/// Rows of the screenshot with any non-white pixel (text, axes, grid: a chart of 330 px adds
/// about as many), and the number of strongly coloured pixels (the data lines and bars).
fn ink(shot: &(usize, u32, Vec<u8>)) -> (usize, usize) {
    let (channels, width, px) = shot;
    let mut rows = 0;
    let mut colour = 0;
    for row in px.chunks_exact(channels * *width as usize) {
        let mut inked = false;
        for p in row.chunks_exact(*channels) {
            let (mx, mn) = (p[..3].iter().max().unwrap(), p[..3].iter().min().unwrap());
            inked |= *mn < 200;
            colour += (mx - mn > 100) as usize;
        }
        rows += inked as usize;
    }
    (rows, colour)
}

fn report(args: &[&str]) {
    let o = util::bin().arg("report").args(args).output().unwrap();
    assert!(o.status.success(), "report {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn html_reports_of_real_runs_and_a_comparison_render_in_headless_chromium() {
    let dir = std::env::temp_dir().join(format!("netblast-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (server, addr) = util::spawn_server();
    let _server = KillOnDrop(server);
    let web = Responder::start(false);
    let target = addr.to_string();
    let url = format!("http://{}/", web.addr);
    let path = |n: &str| dir.join(n).display().to_string();
    for (out, args) in [
        ("bulk.json", vec!["--target", &target, "--flows", "2", "-t", "2", "-i", "500ms"]),
        ("rr-a.json", vec!["--target", &target, "--profile", "latency", "-t", "1", "-i", "250ms"]),
        ("rr-b.json", vec!["--target", &target, "--profile", "latency", "-t", "1", "-i", "250ms"]),
        ("http.json", vec!["--url", &url, "--profile", "http-max", "-c", "4", "-t", "1", "-i", "250ms"]),
    ] {
        let o = util::run_cmd().args(&args).args(["-q", "-o", &path(out)]).output().unwrap();
        assert!(o.status.success(), "run {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }

    // One run each: every chart its figures allow, drawn, and a page that is not blank.
    for (json, charts) in [
        ("bulk.json", &["chart-throughput", "chart-rtt", "chart-retransmits"][..]),
        ("rr-a.json", &["chart-throughput", "chart-latency", "chart-retransmits"][..]),
        ("http.json", &["chart-latency", "chart-http-rate", "chart-http-status"][..]),
    ] {
        let page = dir.join(json.replace(".json", ".html"));
        report(&[&path(json), "--html", &page.display().to_string()]);
        let html = std::fs::read_to_string(&page).unwrap();
        for outside in ["<script", "<link", "@import", "src=", "href=", "url("] {
            assert!(!html.contains(outside), "{json}: not self-contained: {outside}");
        }
        let (dom, shot) = browse(&page, &dir);
        for id in charts {
            assert!(marks(&dom, id) >= 4, "{json}: {id} draws nothing");
        }
        let (rows, colour) = ink(&shot);
        let want = 300 * charts.len();
        assert!(rows > want && colour > 2000, "{json}: {rows} rows inked (want > {want}), {colour} coloured pixels");
    }
    assert!(!std::fs::read_to_string(dir.join("bulk.html")).unwrap().contains("chart-latency"), "bulk has no latency");

    // A comparison: both runs side by side, every headline figure with its change.
    let page = dir.join("compare.html");
    report(&[&path("rr-b.json"), "--compare", &path("rr-a.json"), "--html", &page.display().to_string()]);
    let (dom, shot) = browse(&page, &dir);
    for id in ["chart-latency", "base-chart-latency", "chart-throughput", "base-chart-throughput"] {
        assert!(marks(&dom, id) >= 4, "compare: {id} draws nothing");
    }
    let table = &dom[dom.find("id=\"figures\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    for figure in ["p50", "p99", "msgs", "retransmits"] {
        let row = &table[table.find(&format!(">{figure}<")).unwrap_or_else(|| panic!("no {figure} row"))..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains('%') || row.contains(">0<"), "{figure}: no change column: {row}");
    }
    let (rows, colour) = ink(&shot);
    assert!(rows > 900 && colour > 2000, "compare: {rows} rows inked, {colour} coloured pixels");
    let _ = std::fs::remove_dir_all(&dir);
}
