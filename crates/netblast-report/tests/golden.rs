//! Every stored result (`testdata/`: real /2 and /3 results of every kind, merges, and /4 results) renders
//! as it did when its expected text was written (`testdata/expected/`): the human report and
//! the CSV rows, byte for byte. A change to what a report says fails here; when the change is
//! meant, `NETBLAST_BLESS=1 cargo test -p netblast-report --test golden` rewrites the expected
//! files, and the diff is reviewed with the change.

use std::path::{Path, PathBuf};

fn results(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "expected") {
            results(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// What `netblast report` and `--csv` print of `r`.
fn renderings(r: &netblast_spec::RunResult) -> Vec<(&'static str, String)> {
    use netblast_report::csv;
    vec![
        ("txt", netblast_report::text::full(r)),
        ("intervals.csv", csv::intervals(r)),
        ("streams.csv", csv::streams(r)),
        ("tests.csv", csv::tests(r)),
    ]
}

#[test]
fn every_stored_result_renders_as_expected() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files = Vec::new();
    results(&root, &mut files);
    files.sort();
    assert!(files.len() >= 13, "the stored results were found: {files:?}");
    let bless = std::env::var_os("NETBLAST_BLESS").is_some();
    let mut differ = Vec::new();
    for f in &files {
        let r = netblast_spec::upgrade::read_result(&std::fs::read_to_string(f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let rel = f.strip_prefix(&root).unwrap().with_extension("");
        for (ext, text) in renderings(&r) {
            let expected = root.join("expected").join(&rel).with_extension(ext);
            if bless {
                std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
                std::fs::write(&expected, &text).unwrap();
                continue;
            }
            match std::fs::read_to_string(&expected) {
                Ok(e) if e == text => {}
                Ok(e) => {
                    let line = e.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(e.lines().count());
                    differ.push(format!("{} differs from line {}", expected.display(), line + 1));
                }
                Err(_) => differ.push(format!("{} is missing", expected.display())),
            }
        }
    }
    assert!(
        differ.is_empty(),
        "renderings changed (NETBLAST_BLESS=1 rewrites them when meant):\n{}",
        differ.join("\n")
    );
}
