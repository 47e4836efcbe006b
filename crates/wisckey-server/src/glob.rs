//! Redis's glob patterns (SCAN MATCH, CONFIG GET): `*` any run, `?` one byte, `[abc]`,
//! `[^a-z]` classes with ranges, `\x` a literal x. Byte-wise, case-sensitive. Matching is
//! iterative with one backtrack point, so it is linear in practice and never recurses.

/// Whether `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    // Where to resume after the last `*`: (pattern index after it, input index it covers to).
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p + 1, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    let (ok, next) = class(pattern, p, s[i]);
                    if ok {
                        p = next;
                        i += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() && pattern[p + 1] == s[i] => {
                    p += 2;
                    i += 1;
                    continue;
                }
                b'\\' if p + 1 < pattern.len() => {}
                c if c == s[i] => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, si)) => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches byte `c` against the class starting at `pattern[start] == b'['`. Returns whether
/// it matched and the index after the class. As Redis's `stringmatchlen` reads it: `\x` is
/// a literal x; `x-y` is a range (either order) whenever two more pattern bytes follow `x`,
/// even if `y` is `]`; a class with no closing `]` takes the rest of the pattern.
fn class(pattern: &[u8], start: usize, c: u8) -> (bool, usize) {
    let mut p = start + 1;
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        let left = pattern.len() - p.min(pattern.len());
        if left == 0 {
            return (hit != negate, pattern.len());
        }
        if pattern[p] == b'\\' && left >= 2 {
            p += 1;
            hit |= pattern[p] == c;
        } else if pattern[p] == b']' {
            break;
        } else if left >= 3 && pattern[p + 1] == b'-' {
            let (lo, hi) = (
                pattern[p].min(pattern[p + 2]),
                pattern[p].max(pattern[p + 2]),
            );
            hit |= (lo..=hi).contains(&c);
            p += 2;
        } else {
            hit |= pattern[p] == c;
        }
        p += 1;
    }
    (hit != negate, p + 1)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_examples() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "anything"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("user:*:name", "user:42:name"),
            ("a\\*b", "a*b"),
            ("*a*b*c*", "xxaxxbxxcxx"),
            // Redis's reading of odd classes: an unclosed one takes the rest of the
            // pattern, `\]` is a literal `]`, and `a-]` is the range `]`..=`a`.
            ("a[bc", "ab"),
            ("a[bc", "ac"),
            ("a[\\]", "a]"),
            ("a[a-]", "a]"),
            ("a[a-]", "a^"),
        ];
        let no: &[(&str, &str)] = &[
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("user:*", "use"),
            ("a\\*b", "axb"),
            ("abc", "abcd"),
            ("a[", "a["),
            ("*[", "x["),
            ("a[a-]", "a-"),
            ("a[bc", "a[bc"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} should match {s}");
        }
        for (p, s) in no {
            assert!(
                !matches(p.as_bytes(), s.as_bytes()),
                "{p} should not match {s}"
            );
        }
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let s = vec![b'a'; 10_000];
        let p = b"*a*a*a*a*a*a*a*a*b";
        assert!(!matches(p, &s));
    }
}
