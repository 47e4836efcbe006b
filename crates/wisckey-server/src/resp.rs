//! RESP2 (and RESP3 replies, after `HELLO 3`): the request decoder (multibulk arrays of bulk strings, and inline commands as
//! redis-cli and redis-benchmark's PING_INLINE send them) and the reply encoder.
//!
//! The decoder is incremental: [`Decoder::next`] takes the bytes received so far and either
//! returns one complete command, asks for more bytes, or fails with a [`ProtocolError`]
//! (after which the connection must be closed: the stream cannot be resynchronised).
//! Invariants: no input is copied before its element is complete; every length is checked
//! against [`Limits`] before anything is allocated for it, so a client cannot make the
//! server reserve more than `max_query_len` bytes for one command.

use std::fmt;

/// Size limits applied while decoding, named after Redis's equivalents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Most elements in one multibulk request.
    pub max_multibulk_len: usize,
    /// Largest inline request, or count line (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline_len: usize,
    /// Most argument bytes one command may hold (`client-query-buffer-limit`).
    pub max_query_len: usize,
}

impl Limits {
    /// The limits for a client that has not authenticated yet (with `requirepass`), as
    /// Redis 7's: at most 10 arguments of 16 KiB each, so that a client without the
    /// password cannot make the server buffer large requests.
    pub fn unauthenticated(self) -> Limits {
        Limits {
            max_bulk_len: self.max_bulk_len.min(16 << 10),
            max_multibulk_len: self.max_multibulk_len.min(10),
            max_inline_len: self.max_inline_len,
            max_query_len: self.max_query_len.min(10 * (16 << 10)),
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bulk_len: 512 << 20,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 << 10,
            max_query_len: 1 << 30,
        }
    }
}

/// Why a request cannot be decoded. Its `Display` is Redis's text after `ERR `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// An inline request longer than `max_inline_len` without a newline.
    TooBigInline,
    /// A `*` or `$` line longer than `max_inline_len` without a CRLF.
    TooBigCount(&'static str),
    /// A multibulk count that is not an integer or exceeds `max_multibulk_len`.
    InvalidMultibulkLength,
    /// A bulk length that is not an integer, is negative or exceeds `max_bulk_len`.
    InvalidBulkLength,
    /// Something other than `$` where a bulk string was expected.
    ExpectedBulk(u8),
    /// A bulk string not followed by CRLF.
    BadBulkTerminator,
    /// An inline request with an unterminated quote.
    UnbalancedQuotes,
    /// The command's arguments would exceed `max_query_len`.
    QueryTooLong,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::TooBigCount(what) => write!(f, "too big {what} count string"),
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedBulk(b) => {
                write!(f, "expected '$', got '{}'", char::from(*b).escape_default())
            }
            ProtocolError::BadBulkTerminator => f.write_str("bulk string not followed by CRLF"),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            ProtocolError::QueryTooLong => f.write_str("request exceeds the query buffer limit"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One decoded command: its arguments, the name first. May be empty (`*0`, a blank inline
/// line), which callers skip as Redis does.
pub type Command = Vec<Vec<u8>>;

/// A multibulk request whose header has been read but not all of its elements.
#[derive(Debug)]
struct Partial {
    remaining: usize,
    args: Command,
    bytes: usize,
}

/// Incremental request decoder for one connection.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    partial: Option<Partial>,
}

impl Decoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            partial: None,
        }
    }

    /// Enforces `limits` from the next request on (the one half-read keeps the old ones).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Whether a multibulk request is half-read (its header consumed).
    pub fn in_request(&self) -> bool {
        self.partial.is_some()
    }

    /// Decodes the next command from `buf[*pos..]`, advancing `*pos` past what it consumed.
    /// `Ok(None)`: more bytes are needed (keep `buf[*pos..]` and append to it).
    pub fn next(&mut self, buf: &[u8], pos: &mut usize) -> Result<Option<Command>, ProtocolError> {
        if self.partial.is_none() {
            let Some(&first) = buf.get(*pos) else {
                return Ok(None);
            };
            if first != b'*' {
                return self.inline(buf, pos);
            }
            let Some((line, next)) = line_at(buf, *pos, self.limits.max_inline_len, "mbulk")?
            else {
                return Ok(None);
            };
            let n = parse_int(&line[1..]).ok_or(ProtocolError::InvalidMultibulkLength)?;
            // Compared as usize, never as i64: a limit above i64::MAX would wrap negative
            // and refuse every request. A count that does not fit a usize exceeds any limit.
            // `*0` and negative counts (`*-1`) are an empty command, as in Redis.
            let n = if n <= 0 {
                0
            } else {
                usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= self.limits.max_multibulk_len)
                    .ok_or(ProtocolError::InvalidMultibulkLength)?
            };
            *pos = next;
            if n == 0 {
                return Ok(Some(Vec::new()));
            }
            self.partial = Some(Partial {
                remaining: n,
                args: Vec::with_capacity(n.min(1024)),
                bytes: 0,
            });
        }
        let limits = self.limits;
        let Some(partial) = self.partial.as_mut() else {
            return Ok(None);
        };
        while partial.remaining > 0 {
            let Some(&first) = buf.get(*pos) else {
                return Ok(None);
            };
            if first != b'$' {
                return Err(ProtocolError::ExpectedBulk(first));
            }
            let Some((line, start)) = line_at(buf, *pos, limits.max_inline_len, "bulk")? else {
                return Ok(None);
            };
            let len = parse_int(&line[1..]).ok_or(ProtocolError::InvalidBulkLength)?;
            // A negative length fails the conversion; the limit is compared as usize (see
            // the multibulk count above).
            let len = usize::try_from(len)
                .ok()
                .filter(|&len| len <= limits.max_bulk_len)
                .ok_or(ProtocolError::InvalidBulkLength)?;
            if partial.bytes.saturating_add(len) > limits.max_query_len {
                return Err(ProtocolError::QueryTooLong);
            }
            let end = start.saturating_add(len);
            if buf.len() < end.saturating_add(2) {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::BadBulkTerminator);
            }
            partial.args.push(buf[start..end].to_vec());
            partial.bytes += len;
            partial.remaining -= 1;
            *pos = end + 2;
        }
        Ok(self.partial.take().map(|p| p.args))
    }

    fn inline(&mut self, buf: &[u8], pos: &mut usize) -> Result<Option<Command>, ProtocolError> {
        let rest = &buf[*pos..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            if rest.len() > self.limits.max_inline_len {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        if nl > self.limits.max_inline_len {
            return Err(ProtocolError::TooBigInline);
        }
        let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
        let args = split_args(line)?;
        *pos += nl + 1;
        Ok(Some(args))
    }
}

/// The CRLF-terminated line starting at `pos` and the offset after its CRLF; `None` if the
/// CRLF has not arrived yet (an error once more than `max` bytes came without one).
fn line_at<'a>(
    buf: &'a [u8],
    pos: usize,
    max: usize,
    what: &'static str,
) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
    let rest = &buf[pos..];
    let window = &rest[..rest.len().min(max.saturating_add(2))];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&rest[..i], pos + i + 2))),
        None if rest.len() > max => Err(ProtocolError::TooBigCount(what)),
        None => Ok(None),
    }
}

/// Redis's strict integer syntax (string2ll): optional `-`, decimal digits, no leading
/// zeros except `0` itself, no `+`, no spaces, within i64.
pub fn parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, s),
    };
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' || (neg && digits == b"0") {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        let d = i64::from(d - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// Splits an inline request into arguments like Redis's sdssplitargs: whitespace
/// separates; "double quotes" understand \n \r \t \b \a \\ \" and \xHH; 'single quotes'
/// understand \'. A quote may open inside a word (`a"b c"` is one argument, `ab c`), and a
/// closing quote must be followed by whitespace or the end.
///
/// Whitespace as Redis's `sdssplitargs` has it: C's `isspace` between arguments and after a
/// closing quote, but only space, tab, CR and LF end an unquoted argument (a form feed or
/// vertical tab inside one is part of it).
pub fn split_args(line: &[u8]) -> Result<Command, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_c_space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(args);
        }
        let mut arg = Vec::new();
        while let Some(&c) = line.get(i).filter(|&&c| !ends_inline_arg(c)) {
            match c {
                b'"' => {
                    i = double_quoted(line, i + 1, &mut arg)?;
                    break;
                }
                b'\'' => {
                    i = single_quoted(line, i + 1, &mut arg)?;
                    break;
                }
                _ => {
                    arg.push(c);
                    i += 1;
                }
            }
        }
        args.push(arg);
    }
}

/// Appends the "..." section that starts at `i` (after its opening quote) to `arg`;
/// returns the offset after the closing quote.
fn double_quoted(line: &[u8], mut i: usize, arg: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        let Some(&c) = line.get(i) else {
            return Err(ProtocolError::UnbalancedQuotes);
        };
        match c {
            b'\\'
                if line.get(i + 1) == Some(&b'x')
                    && line.len() > i + 3
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit() =>
            {
                arg.push((hex(line[i + 2]) << 4) | hex(line[i + 3]));
                i += 4;
            }
            b'\\' if i + 1 < line.len() => {
                arg.push(match line[i + 1] {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 8,
                    b'a' => 7,
                    other => other,
                });
                i += 2;
            }
            b'"' => return after_closing_quote(line, i + 1),
            _ => {
                arg.push(c);
                i += 1;
            }
        }
    }
}

/// Appends the '...' section that starts at `i` (after its opening quote) to `arg`;
/// returns the offset after the closing quote.
fn single_quoted(line: &[u8], mut i: usize, arg: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        let Some(&c) = line.get(i) else {
            return Err(ProtocolError::UnbalancedQuotes);
        };
        match c {
            b'\\' if line.get(i + 1) == Some(&b'\'') => {
                arg.push(b'\'');
                i += 2;
            }
            b'\'' => return after_closing_quote(line, i + 1),
            _ => {
                arg.push(c);
                i += 1;
            }
        }
    }
}

fn after_closing_quote(line: &[u8], i: usize) -> Result<usize, ProtocolError> {
    match line.get(i) {
        Some(&c) if !is_c_space(c) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(i),
    }
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// A reply, encoded in RESP2 by [`Reply::encode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text` (must not contain CR or LF).
    Simple(&'static str),
    /// `-text`: the text starts with the error code (`ERR`, `WRONGTYPE`, `NOAUTH`, ...).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len` and the bytes.
    Bulk(Vec<u8>),
    /// `$-1`.
    Nil,
    /// `*-1`: no array (EXEC of a transaction that WATCH aborted).
    NilArray,
    /// `*n` and the elements.
    Array(Vec<Reply>),
    /// Field/value pairs: RESP3 `%n`; in RESP2 a flat array of 2n elements.
    Map(Vec<(Reply, Reply)>),
    /// A reply already encoded, its CRLF included: an element of EXEC's reply encoded in
    /// the protocol in force when its command ran (a HELLO inside the transaction switches
    /// the protocol from its own reply on, as in Redis).
    Encoded(Vec<u8>),
}

impl Reply {
    /// `+OK`.
    pub const OK: Reply = Reply::Simple("OK");

    /// An error reply; CR and LF in `text` become spaces so the reply stays one line.
    pub fn err(text: impl Into<String>) -> Reply {
        let mut text: String = text.into();
        if text.contains(['\r', '\n']) {
            text = text.replace(['\r', '\n'], " ");
        }
        Reply::Error(text)
    }

    /// A bulk reply of a string.
    pub fn bulk(s: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(s.into())
    }

    /// Appends the RESP2 encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_as(out, false);
    }

    /// Appends the encoding to `out`: RESP3 (after `HELLO 3`) when `resp3`, else RESP2.
    /// They differ only in nil (`_` against `$-1`) and maps.
    pub fn encode_as(&self, out: &mut Vec<u8>, resp3: bool) {
        match self {
            Reply::Simple(s) => {
                out.push(b'+');
                out.extend_from_slice(s.as_bytes());
            }
            Reply::Error(s) => {
                out.push(b'-');
                out.extend_from_slice(s.as_bytes());
            }
            Reply::Integer(n) => {
                out.push(b':');
                push_decimal(out, *n);
            }
            Reply::Bulk(b) => {
                push_bulk(out, b);
                return;
            }
            Reply::Nil | Reply::NilArray if resp3 => out.push(b'_'),
            Reply::NilArray => out.extend_from_slice(b"*-1"),
            Reply::Nil => out.extend_from_slice(b"$-1"),
            Reply::Array(items) => {
                out.push(b'*');
                push_decimal(out, items.len());
                out.extend_from_slice(b"\r\n");
                for item in items {
                    item.encode_as(out, resp3);
                }
                return;
            }
            Reply::Encoded(bytes) => {
                out.extend_from_slice(bytes);
                return;
            }
            Reply::Map(pairs) => {
                let n = if resp3 { pairs.len() } else { 2 * pairs.len() };
                out.push(if resp3 { b'%' } else { b'*' });
                push_decimal(out, n);
                out.extend_from_slice(b"\r\n");
                for (k, v) in pairs {
                    k.encode_as(out, resp3);
                    v.encode_as(out, resp3);
                }
                return;
            }
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `n` in decimal (no allocation: replies are encoded per command).
fn push_decimal(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `data` as a bulk string (`$<len>\r\n<data>\r\n`), the same in RESP2 and RESP3.
pub fn push_bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'$');
    push_decimal(out, data.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What ends an unquoted inline argument in Redis.
fn ends_inline_arg(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], limits: Limits) -> Result<Vec<Command>, ProtocolError> {
        let mut d = Decoder::new(limits);
        let mut pos = 0;
        let mut out = Vec::new();
        while let Some(c) = d.next(input, &mut pos)? {
            out.push(c);
        }
        assert_eq!(pos, input.len(), "all input consumed");
        Ok(out)
    }

    fn args(v: &[&str]) -> Command {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline_mixed() {
        let input =
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nSET a \"b c\\x41\\n\" 'd\\'e'\r\n*0\r\n";
        let got = all(input, Limits::default());
        let mut set = args(&["SET", "a"]);
        set.push(b"b cA\n".to_vec());
        set.push(b"d'e".to_vec());
        assert_eq!(
            got,
            Ok(vec![args(&["GET", "k"]), args(&["PING"]), set, vec![]])
        );
    }

    #[test]
    fn byte_at_a_time_gives_the_same_commands() {
        let input = b"*3\r\n$3\r\nSET\r\n$2\r\n\r\n\r\n$0\r\n\r\nECHO hi\n";
        let mut d = Decoder::new(Limits::default());
        let (mut pos, mut got) = (0, Vec::new());
        for end in 1..=input.len() {
            while let Some(c) = d.next(&input[..end], &mut pos).expect("valid input") {
                got.push(c);
            }
        }
        assert_eq!(got, vec![args(&["SET", "\r\n", ""]), args(&["ECHO", "hi"])]);
    }

    #[test]
    fn a_quote_may_open_inside_a_word_as_in_redis() {
        assert_eq!(
            split_args(b"SET k\"ey a\" x'y z' plain"),
            Ok(args(&["SET", "key a", "xy z", "plain"]))
        );
        assert_eq!(
            split_args(b"SET a\"b\"c v"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(split_args(b"SET a'b"), Err(ProtocolError::UnbalancedQuotes));
    }

    #[test]
    fn a_form_feed_inside_an_inline_argument_is_part_of_it_as_in_redis() {
        assert_eq!(
            split_args(b"SET ik a\x0cb"),
            Ok(args(&["SET", "ik", "a\x0cb"]))
        );
        // Between arguments it is whitespace, as C's isspace says.
        assert_eq!(split_args(b"\x0cGET\x0b k"), Ok(args(&["GET\x0b", "k"])));
    }

    #[test]
    fn malformed_requests_are_named() {
        let l = Limits::default();
        assert_eq!(
            all(b"*x\r\n", l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            all(b"*1\r\n$-2\r\n", l),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            all(b"*1\r\n+foo\r\n", l),
            Err(ProtocolError::ExpectedBulk(b'+'))
        );
        assert_eq!(
            all(b"*1\r\n$1\r\nab\r\n", l),
            Err(ProtocolError::BadBulkTerminator)
        );
        assert_eq!(all(b"SET \"a\n", l), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(
            all(b"SET \"a\"b\n", l),
            Err(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn limits_are_enforced_before_allocation() {
        let l = Limits {
            max_bulk_len: 10,
            max_multibulk_len: 3,
            max_inline_len: 16,
            max_query_len: 15,
        };
        assert_eq!(
            all(b"*4\r\n", l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            all(b"*1\r\n$11\r\n", l),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(
            all(b"*2\r\n$10\r\n0123456789\r\n$6\r\n", l),
            Err(ProtocolError::QueryTooLong)
        );
        assert_eq!(all(&[b'A'; 17], l), Err(ProtocolError::TooBigInline));
        assert_eq!(
            all(&[b'*'; 19], l),
            Err(ProtocolError::TooBigCount("mbulk"))
        );
        // A huge declared length is refused at once, not awaited.
        let mut d = Decoder::new(Limits::default());
        assert_eq!(
            d.next(b"*1\r\n$99999999999\r\n", &mut 0),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    /// Limits are usizes: one above i64::MAX (`--max-bulk-len 18446744073709551615`) must
    /// not wrap negative and refuse every request, and lengths are still checked against
    /// it (and against a limit at exactly the largest count a request can spell).
    #[test]
    fn limits_above_i64_max_accept_requests() {
        for limit in [usize::MAX, i64::MAX as usize + 1, i64::MAX as usize] {
            let l = Limits {
                max_bulk_len: limit,
                max_multibulk_len: limit,
                max_inline_len: 64 << 10,
                max_query_len: limit,
            };
            assert_eq!(
                all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*-1\r\n", l),
                Ok(vec![args(&["GET", "k"]), vec![], vec![]]),
                "limit {limit}"
            );
            assert_eq!(
                all(b"*1\r\n$-2\r\n", l),
                Err(ProtocolError::InvalidBulkLength),
                "limit {limit}"
            );
            // The largest lengths a request can spell are within the limit: the decoder
            // waits for their bytes rather than refusing them.
            let mut d = Decoder::new(l);
            let header = b"*9223372036854775807\r\n$9223372036854775807\r\n";
            assert_eq!(d.next(header, &mut 0), Ok(None), "limit {limit}");
        }
        // A limit just below the count still refuses it.
        let l = Limits {
            max_multibulk_len: i64::MAX as usize - 1,
            ..Limits::default()
        };
        assert_eq!(
            all(b"*9223372036854775807\r\n", l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
    }

    #[test]
    fn strict_integers() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-12"), Some(-12));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_int(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn replies_encode() {
        let mut out = Vec::new();
        Reply::Array(vec![
            Reply::OK,
            Reply::err("ERR a\r\nb"),
            Reply::Integer(-3),
            Reply::bulk("x"),
            Reply::Nil,
            Reply::Array(vec![]),
        ])
        .encode(&mut out);
        assert_eq!(
            out,
            b"*6\r\n+OK\r\n-ERR a  b\r\n:-3\r\n$1\r\nx\r\n$-1\r\n*0\r\n"
        );
    }

    #[test]
    fn resp3_differs_only_in_nil_and_maps() {
        let reply = Reply::Array(vec![
            Reply::Nil,
            Reply::Map(vec![(Reply::bulk("k"), Reply::Integer(1))]),
        ]);
        let (mut v2, mut v3) = (Vec::new(), Vec::new());
        reply.encode_as(&mut v2, false);
        reply.encode_as(&mut v3, true);
        assert_eq!(v2, b"*2\r\n$-1\r\n*2\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(v3, b"*2\r\n_\r\n%1\r\n$1\r\nk\r\n:1\r\n");
    }
}
