//! Headless Chromium for the tests that judge a page (Debian's `chromium`, installed by
//! scripts/setup.sh): its DOM after parsing and a screenshot, and what was drawn.

use crate::util::wait_output;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Chromium binary; the test fails (does not skip) without one: the report is only known to
/// render when a browser has drawn it.
pub fn chromium() -> PathBuf {
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
pub fn browse(page: &Path, dir: &Path) -> (String, (usize, u32, Vec<u8>)) {
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

/// The drawn marks inside `<figure id="ID">` of the browser's DOM: the segments of its lines
/// and its bars; panics when the figure is missing or holds no SVG.
pub fn marks(dom: &str, id: &str) -> usize {
    let fig = figure(dom, id);
    assert!(fig.contains("<svg"), "{id}: no svg");
    let segments: usize = fig
        .match_indices(" d=\"")
        .map(|(i, _)| fig[i + 4..].split('"').next().unwrap().matches(['L', 'H']).count())
        .sum();
    // Less the plot's frame.
    segments + fig.matches("<rect").count().saturating_sub(1)
}

/// The HTML of `<figure id="ID">` in the DOM; panics when it is missing.
pub fn figure<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no figure {id} in the rendered page"));
    &dom[at..at + dom[at..].find("</figure>").unwrap()]
}

/// The HTML of the element with `id` up to the end of its table.
pub fn table<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no table {id} in the rendered page"));
    &dom[at..at + dom[at..].find("</table>").unwrap()]
}

/// The cells of the row of `table` whose HTML contains `key`, as text.
pub fn row_cells(table: &str, key: &str) -> Vec<String> {
    let at = table.find(key).unwrap_or_else(|| panic!("no row with {key:?} in {table}"));
    let start = table[..at].rfind("<tr").unwrap();
    let row = &table[start..start + table[start..].find("</tr>").unwrap()];
    row.split("<td").skip(1).map(|c| strip_tags(&c[c.find('>').unwrap() + 1..])).collect()
}

/// Text without tags, entities for &, < and > decoded.
pub fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for ch in html.chars() {
        match ch {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").trim().to_string()
}

/// Rows of the screenshot with any non-white pixel (text, axes, grid: a chart of 330 px adds
/// about as many), and the number of strongly coloured pixels (the data lines and bars).
pub fn ink(shot: &(usize, u32, Vec<u8>)) -> (usize, usize) {
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
