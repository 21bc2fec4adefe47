//! An HTTP/1.x response head, read for what a load generator needs of it: the status, how the
//! body is framed and whether the connection stays open. Line ends are found eight bytes at a
//! time, header names checked against the token alphabet through a table, and only the three
//! headers that decide framing and reuse are read further; other values are passed over (a
//! client that counts responses has no use for them). The tests hold it against httparse: the
//! same reading of valid heads, and a refusal of each malformed one httparse refuses that could
//! misframe a body.

/// What a response head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head, its blank line included.
    pub len: usize,
    /// Status code.
    pub status: u16,
    /// The body's length (`Content-Length`, the first one), unless chunked.
    pub length: Option<u64>,
    /// `Transfer-Encoding` names `chunked`.
    pub chunked: bool,
    /// The connection closes after this response: HTTP/1.0 without `Connection: keep-alive`,
    /// or `Connection: close`.
    pub close: bool,
}

/// Most header lines accepted in one head.
pub const MAX_HEADERS: usize = 64;

/// Why a head is not one.
pub type Malformed = &'static str;

/// Token characters (RFC 9110 `tchar`): what a header name is made of.
const TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        c += 1;
    }
    t
};

/// A line without its line ending (CRLF, or a bare LF, which RFC 9112 lets a recipient accept).
fn line(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// `bytes` without leading and trailing spaces and tabs.
fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// Whether `token` occurs in `value`, ASCII case ignored (at once when it is the whole value,
/// as `keep-alive`, `close` and `chunked` most often are).
fn contains_ignore_case(value: &[u8], token: &[u8]) -> bool {
    let v = trim(value);
    v.eq_ignore_ascii_case(token)
        || (v.len() > token.len() && v.windows(token.len()).any(|w| w.eq_ignore_ascii_case(token)))
}

/// The index of the first `\n` in `s`: eight bytes per step (a word with a zero byte where the
/// line feed is; the lowest such byte is exact).
fn find_nl(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(chunk) = s.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or_default()) ^ (ONES * u64::from(b'\n'));
        let zero = x.wrapping_sub(ONES) & !x & HIGHS;
        if zero != 0 {
            return Some(i + (zero.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s[i..].iter().position(|b| *b == b'\n').map(|p| i + p)
}

/// Parses the head at the start of `buf`: `Ok(None)` while it is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, Malformed> {
    let Some(eol) = find_nl(buf) else {
        // A head that cannot be HTTP is refused at once, not waited for.
        let n = buf.len().min(7);
        return if buf[..n] == b"HTTP/1."[..n] { Ok(None) } else { Err("not an HTTP/1.x status line") };
    };
    let status_line = line(&buf[..eol]);
    // "HTTP/1.x SSS[ reason]"
    if status_line.len() < 12 || !status_line.starts_with(b"HTTP/1.") || status_line[8] != b' ' {
        return Err("not an HTTP/1.x status line");
    }
    let http10 = match status_line[7] {
        b'0' => true,
        b'1' => false,
        _ => return Err("not an HTTP/1.x status line"),
    };
    let code = &status_line[9..12];
    if !code.iter().all(u8::is_ascii_digit) || status_line.get(12).is_some_and(|b| *b != b' ') {
        return Err("malformed status code");
    }
    let status = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    let mut head = Head { len: 0, status, length: None, chunked: false, close: http10 };
    let mut at = eol + 1;
    let mut count = 0;
    loop {
        let Some(n) = find_nl(&buf[at..]) else { return Ok(None) };
        let l = line(&buf[at..at + n]);
        at += n + 1;
        if l.is_empty() {
            head.len = at;
            return Ok(Some(head));
        }
        count += 1;
        if count > MAX_HEADERS {
            return Err("more than 64 header lines");
        }
        // The name: token characters up to the colon. Empty names, folded continuation lines
        // and spaces before the colon are refused.
        let colon = l.iter().position(|b| !TCHAR[usize::from(*b)]).unwrap_or(l.len());
        match l.get(colon) {
            Some(b':') if colon > 0 => {}
            Some(b':') => return Err("malformed header name"),
            _ if l[colon..].contains(&b':') => return Err("malformed header name"),
            _ => return Err("a header line without a colon"),
        }
        let name = &l[..colon];
        let value = &l[colon + 1..];
        match name.len() {
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                let v = trim(value);
                if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
                    return Err("invalid Content-Length");
                }
                let n = v.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
                head.length = head.length.or(Some(n));
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                head.chunked |= contains_ignore_case(value, b"chunked");
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                if contains_ignore_case(value, b"close") {
                    head.close = true;
                } else if contains_ignore_case(value, b"keep-alive") {
                    head.close = false;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same head as httparse reads it, where httparse reads it at all.
    fn reference(buf: &[u8]) -> Result<Option<Head>, ()> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut headers);
        match r.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let mut h =
                    Head { len, status: r.code.unwrap(), length: None, chunked: false, close: r.version == Some(0) };
                for x in r.headers.iter() {
                    if x.name.eq_ignore_ascii_case("content-length") {
                        let v = std::str::from_utf8(x.value).map_err(|_| ())?.trim().parse::<u64>().map_err(|_| ())?;
                        h.length = h.length.or(Some(v));
                    } else if x.name.eq_ignore_ascii_case("transfer-encoding") {
                        h.chunked |= contains_ignore_case(x.value, b"chunked");
                    } else if x.name.eq_ignore_ascii_case("connection") {
                        if contains_ignore_case(x.value, b"close") {
                            h.close = true;
                        } else if contains_ignore_case(x.value, b"keep-alive") {
                            h.close = false;
                        }
                    }
                }
                Ok(Some(h))
            }
            Ok(httparse::Status::Partial) => Ok(None),
            Err(_) => Err(()),
        }
    }

    fn heads() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = [
            &b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Thu, 26 Nov 2026 05:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 45\r\nLast-Modified: Wed, 25 Nov 2026 03:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"abc-2d\"\r\nAccept-Ranges: bytes\r\n\r\n"[..],
            b"HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: gzip, Chunked\r\n\r\n",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.0 200 OK\r\nCONNECTION: Keep-Alive\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 204 No Content\nX-A: b\n\n",
            b"HTTP/1.1 200\r\nContent-Length:7\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 7  \r\nContent-Length: 9\r\nConnection: upgrade, close\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 301 Moved\r\nLocation: /x\r\nX-Empty:\r\n\r\n",
        ]
        .iter()
        .map(|h| h.to_vec())
        .collect();
        // Every prefix of the first head is incomplete, not an error.
        let first = v[0].clone();
        for n in 0..first.len() - 1 {
            v.push(first[..n].to_vec());
        }
        v
    }

    #[test]
    fn reads_what_httparse_reads() {
        for h in heads() {
            let want = reference(&h).expect("the corpus is valid HTTP");
            assert_eq!(parse(&h), Ok(want), "{:?}", String::from_utf8_lossy(&h));
        }
    }

    #[test]
    fn refuses_what_would_misframe_a_body() {
        for (bad, why) in [
            (&b"SSH-2.0-OpenSSH_9.2\r\n"[..], "not an HTTP/1.x status line"),
            (b"SSH-2.0", "not an HTTP/1.x status line"),
            (b"HTTP/2.0 200 OK\r\n\r\n", "not an HTTP/1.x status line"),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", "malformed status code"),
            (b"HTTP/1.1 2000 OK\r\n\r\n", "malformed status code"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", "invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a header line without a colon"),
            (b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", "malformed header name"),
            (b"HTTP/1.1 200 OK\r\nA: b\r\n  folded\r\n\r\n", "a header line without a colon"),
            (b"HTTP/1.1 200 OK\r\n: empty\r\n\r\n", "malformed header name"),
        ] {
            assert_eq!(parse(bad), Err(why), "{:?}", String::from_utf8_lossy(bad));
            assert!(reference(bad).is_err(), "httparse refuses it too: {:?}", String::from_utf8_lossy(bad));
        }
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many), Err("more than 64 header lines"));
    }

    #[test]
    fn line_feeds_are_found_at_every_offset() {
        for len in 0..40 {
            for at in 0..=len {
                let mut s = vec![b'a'; len];
                let want = (at < len).then_some(at);
                if at < len {
                    s[at] = b'\n';
                    // A second one after it does not count; bytes next to 0x0a (0x0b, 0x09) never do.
                    if at + 2 < len {
                        s[at + 2] = b'\n';
                    }
                    if at > 0 {
                        s[at - 1] = 0x0b;
                    }
                }
                assert_eq!(find_nl(&s), want, "{len} {at}");
            }
        }
        assert_eq!(find_nl(&[0x8a; 16]), None, "a high byte is not a line feed");
        assert!(contains_ignore_case(b" Keep-Alive ", b"keep-alive"));
        assert!(contains_ignore_case(b"gzip, chunked", b"chunked"));
        assert!(!contains_ignore_case(b"chunk", b"chunked"));
    }

    #[test]
    fn garbage_never_panics() {
        // A fixed pseudo-random sequence: bytes drawn mostly from the ones HTTP heads are made of.
        let alphabet = b"HTTP/1.0 2:\r\n\t-aZ9\x00\xff";
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for len in 0..2000usize {
            let buf: Vec<u8> = (0..len % 97)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let mut with_start = b"HTTP/1.1 200 OK\r\n".to_vec();
            with_start.extend_from_slice(&buf);
            for b in [&buf, &with_start] {
                if let Ok(Some(h)) = parse(b) {
                    assert!(h.len <= b.len());
                }
            }
        }
    }
}
