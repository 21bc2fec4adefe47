//! Anchors: netblast's figures beside the same run of an established tool, read from what the
//! `scripts/compare-*.sh` scripts print (they run both tools interleaved; this only reads them).

/// A name part from free text: lower case, words joined by `_`.
pub fn slug(text: &str) -> String {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect();
    words.join("_")
}

/// The ratios a `scripts/compare-*.sh` run printed, as (label, ratio): lines that say
/// `…: … ratio X` and table rows `LABEL  A Gb/s  B Gb/s  RATIO …`.
pub fn ratios_of(output: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in output.lines() {
        // A number, with at most trailing punctuation: "1.178", "2.093,", "0.996)".
        let num = |t: &str| {
            t.starts_with(|c: char| c.is_ascii_digit())
                .then(|| t.trim_end_matches([',', ')', ';', ':']))
                .and_then(|t| t.parse::<f64>().ok())
        };
        if let Some(at) = line.find("ratio ") {
            let Some(v) = line[at + 6..].split_whitespace().next().and_then(num) else { continue };
            let head = line[..at].split(':').next().unwrap_or("");
            out.push((slug(head), v));
        } else if line.matches("Gb/s").count() >= 2 {
            let second = line.match_indices("Gb/s").nth(1).map(|(i, _)| i + 4).unwrap_or(0);
            let Some(v) = line[second..].split_whitespace().next().and_then(num) else { continue };
            // The row's label: its text up to the first run of spaces.
            out.push((slug(line.split("  ").next().unwrap_or("")), v));
        }
    }
    // Names stay unique: a repeated label gets _2, _3…
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (label, _) in out.iter_mut() {
        let n = seen.entry(label.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            *label = format!("{label}_{n}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_read_from_every_compare_script_format() {
        let iperf = "test           netblast       iperf3   ratio   Gbit/CPU-s client nb/ip\n\
                     1 flow        41.23 Gb/s    35.00 Gb/s   1.178      20.1 / 18.0\n\
                     zero-copy     50.00 Gb/s    40.00 Gb/s   1.250      25.0 / 20.0\n";
        let qperf = "    wire packets/s (loopback counter, both ways): netblast 123 k/s, qperf 56 k/s, ratio 2.093 (target >= 1.0)\n\
                     requests/s: netblast 30000, wrk 28000, ratio 1.071 (target >= 1.0)\n\
                     received datagrams/s unlimited, netblast/iperf3: ratio 1.289 (target >= 1.0)\n\
                     not a ratio netblast/iperf3: 3 things\n\
                     requests/s: again, ratio 0.5\n";
        let r: Vec<(String, f64)> = ratios_of(iperf).into_iter().chain(ratios_of(qperf)).collect();
        assert_eq!(
            r,
            vec![
                ("1_flow".to_string(), 1.178),
                ("zero_copy".to_string(), 1.25),
                ("wire_packets_s_loopback_counter_both_ways".to_string(), 2.093),
                ("requests_s".to_string(), 1.071),
                ("received_datagrams_s_unlimited_netblast_iperf3".to_string(), 1.289),
                ("requests_s_2".to_string(), 0.5),
            ]
        );
        let cpu = "client CPU per GB, 1 flow, -l 1M: netblast 177.7 ms, iperf3 155.3 ms, ratio 1.144 (target <= 1.0)\n\
                   client CPU per request: netblast 12.56 us, wrk 11.72 us, ratio 1.072 (target <= 1.0)\n";
        assert_eq!(
            ratios_of(cpu),
            vec![("client_cpu_per_gb_1_flow_l_1m".to_string(), 1.144), ("client_cpu_per_request".to_string(), 1.072)]
        );
        let netperf = "connections/s (connect, 1-byte request and response, close): netblast 13474 /s, netperf TCP_CRR 11846 /s, ratio 1.138 (target >= 1.0)\n\
                       one-way latency (RTT/2) p50: netblast 14.43 us, sockperf 12.61 us, ratio 1.147 (target <= 1.0)\n";
        assert_eq!(
            ratios_of(netperf),
            vec![
                ("connections_s_connect_1_byte_request_and_response_close".to_string(), 1.138),
                ("one_way_latency_rtt_2_p50".to_string(), 1.147),
            ]
        );
    }
}
