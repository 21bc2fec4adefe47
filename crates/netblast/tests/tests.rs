//! netblast's integration tests: one binary, one module per area.
//!
//! - `util`: in-process servers on ephemeral ports, in-process runs, the real binary.
//! - `architecture`: docs/architecture.md's crate graph against the manifests.
//! - `campaign`: `netblast campaign`: a matrix run, killed and resumed, bad files, a baseline.
//! - `bulk`: TCP bulk streams end to end (accounting, directions, concurrency, failures).
//! - `cli`: the command line: bad input gets a clear error and exit status 2.
//! - `cps`: new connections per second: counts, rate, failures by cause.
//! - `flood`: a stranger holding every place for unproven connections beside a good client.
//! - `find_max`: `run --find-max` against a capacity made on purpose (nginx `limit_req`).
//! - `habits`: iperf3 habits: --json-stream through jq, -c HOST, -6, -n, --logfile, --timestamps.
//! - `hold`: concurrent connections held, against `ss` and an nftables connection limit.
//! - `hostile`: `serve` against clients that take more than their share (issue 13).
//! - `http`: HTTP floods against the built-in responder and nginx.
//! - `knobs`: DSCP marks, source ports and addresses, each checked by the kernel.
//! - `latency`: latency probes beside a test: idle against loaded, in every rendering.
//! - `limits`: what limited a TCP flow, in namespace pairs, against `ss -ti`.
//! - `merge`: results of concurrent runs merged, and reports of old results.
//! - `metrics`: `serve --metrics` scraped during and after runs, parsed as Prometheus text.
//! - `msg`: msgrate and rr end to end.
//! - `probe`: the eBPF probe (root only; SKIP otherwise).
//! - `protocol`: the data-port protocol: versions, authentication, stream tags, hostile peers.
//! - `browser`: headless Chromium: a page's DOM, a screenshot, what was drawn.
//! - `report`: the HTML report of real runs of every kind, rendered in headless Chromium.
//!
//! Tests run on loopback with short bounded durations; none asserts a speed. Fleets have a
//! binary of their own (`fleet_main.rs`).

mod agentless;
mod architecture;
mod browser;
mod bulk;
mod campaign;
mod cli;
mod cps;
mod find_max;
mod flood;
mod habits;
mod hold;
mod hostile;
mod http;
mod knobs;
mod latency;
mod limits;
mod merge;
mod metrics;
mod msg;
mod probe;
mod protocol;
mod report;
mod util;
