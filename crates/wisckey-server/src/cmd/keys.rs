//! Keyspace commands: DEL/UNLINK, EXISTS, EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT (with Redis 7's
//! NX/XX/GT/LT), TTL/PTTL, PERSIST, TYPE, SCAN, DBSIZE, FLUSHDB/FLUSHALL.
//!
//! SCAN's cursor stands for the next key, so a scan sees every key that exists from the
//! scan's start to its end (Redis's guarantee), in key order, never twice. The cursor is a
//! decimal number that fits in a `u64` (short keys written directly, longer ones through a
//! bounded table: see `crate::cursor`). `0` starts and ends a scan, as in Redis.

use super::{not_integer, syntax_error, Client, Shared};
use crate::error::Error;
use crate::glob;
use crate::resp::{parse_int, Reply};
use crate::store::now_ms;

type Args<'a> = &'a [Vec<u8>];

pub(super) fn del(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    // A key longer than the keyspace allows cannot exist: it is not there to delete (as
    // EXISTS says), and it must not fail the deletion of the others.
    let mut keys: Vec<&Vec<u8>> = (a[1..].iter())
        .filter(|k| k.len() <= crate::format::MAX_USER_KEY)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let guard = sh.store.lock(&keys);
    // A key whose value cannot be read or decoded is deleted and counted (it existed):
    // Redis's DEL never reads values, and failing here would leave no way to remove it.
    let live = sh.store.live_or_unreadable(&keys)?;
    // Expired keys are deleted too (they are garbage either way) but neither counted nor
    // seen by WATCH.
    sh.store.delete_where_live(&guard, &keys, &live)?;
    Ok(Reply::Integer(live.iter().filter(|&&l| l).count() as i64))
}

pub(super) fn exists(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let live = sh.store.live(&a[1..])?.into_iter().filter(|&l| l).count();
    Ok(Reply::Integer(live as i64))
}

/// EXPIRE's NX/XX/GT/LT (Redis 7): when the new expiry is set, given the current one.
#[derive(Debug, Clone, Copy, Default)]
struct ExpireIf {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireIf {
    /// The options after the time, checked as Redis 7 checks them (texts included).
    fn parse(options: Args<'_>) -> Result<ExpireIf, Reply> {
        let mut c = ExpireIf::default();
        for opt in options {
            match opt.to_ascii_uppercase().as_slice() {
                b"NX" => c.nx = true,
                b"XX" => c.xx = true,
                b"GT" => c.gt = true,
                b"LT" => c.lt = true,
                _ => {
                    return Err(Reply::err(format!(
                        "ERR Unsupported option {}",
                        String::from_utf8_lossy(opt)
                    )))
                }
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(Reply::err(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(Reply::err(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether to set expiry `at` on a key whose expiry is `current` (`None`: none, which
    /// GT and LT treat as infinite, as Redis does).
    fn allows(self, current: Option<u64>, at: i64) -> bool {
        let current = current.map(|c| i64::try_from(c).unwrap_or(i64::MAX));
        let refused = (self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| at <= c))
            || (self.lt && current.is_some_and(|c| at >= c));
        !refused
    }
}

fn set_expiry(
    sh: &Shared,
    a: Args<'_>,
    unit_ms: i64,
    absolute: bool,
    name: &str,
) -> Result<Reply, Error> {
    let key = &a[1];
    let condition = match ExpireIf::parse(&a[3..]) {
        Ok(c) => c,
        Err(refused) => return Ok(refused),
    };
    let Some(n) = parse_int(&a[2]) else {
        return Ok(not_integer());
    };
    let now = now_ms() as i64;
    let at = n.checked_mul(unit_ms).and_then(|ms| {
        if absolute {
            Some(ms)
        } else {
            ms.checked_add(now)
        }
    });
    let Some(at) = at else {
        return Ok(Reply::err(format!(
            "ERR invalid expire time in '{name}' command"
        )));
    };
    let guard = sh.store.lock(&[key]);
    let Some(old) = sh.store.get(key)? else {
        return Ok(Reply::Integer(0));
    };
    if !condition.allows(old.expires_at_ms, at) {
        return Ok(Reply::Integer(0));
    }
    if at <= now {
        sh.store.delete(&guard, &[key])?;
    } else {
        // at > now >= 0 here, so the conversion is exact.
        sh.store.put(&guard, key, &old.data, Some(at as u64))?;
    }
    Ok(Reply::Integer(1))
}

pub(super) fn expire(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    set_expiry(sh, a, 1000, false, "expire")
}

pub(super) fn pexpire(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    set_expiry(sh, a, 1, false, "pexpire")
}

pub(super) fn expireat(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    set_expiry(sh, a, 1000, true, "expireat")
}

pub(super) fn pexpireat(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    set_expiry(sh, a, 1, true, "pexpireat")
}

fn remaining_ms(sh: &Shared, key: &[u8]) -> Result<i64, Error> {
    let now = now_ms();
    Ok(match sh.store.get(key)? {
        None => -2,
        Some(s) => match s.expires_at_ms {
            None => -1,
            Some(at) => i64::try_from(at.saturating_sub(now)).unwrap_or(i64::MAX),
        },
    })
}

pub(super) fn ttl(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let ms = remaining_ms(sh, &a[1])?;
    Ok(Reply::Integer(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

pub(super) fn pttl(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(Reply::Integer(remaining_ms(sh, &a[1])?))
}

pub(super) fn persist(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let key = &a[1];
    let guard = sh.store.lock(&[key]);
    match sh.store.get(key)? {
        Some(s) if s.expires_at_ms.is_some() => {
            sh.store.put(&guard, key, &s.data, None)?;
            Ok(Reply::Integer(1))
        }
        _ => Ok(Reply::Integer(0)),
    }
}

pub(super) fn type_(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(Reply::Simple(if sh.store.get(&a[1])?.is_some() {
        "string"
    } else {
        "none"
    }))
}

pub(super) fn scan(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let Some(start) = sh.cursors.decode(&a[1]) else {
        return Ok(Reply::err("ERR invalid cursor"));
    };
    let (mut pattern, mut count, mut type_ok) = (None, 10usize, true);
    let mut i = 2;
    while i < a.len() {
        let Some(arg) = a.get(i + 1) else {
            return Ok(syntax_error());
        };
        match a[i].to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(arg.as_slice()),
            b"COUNT" => match parse_int(arg) {
                Some(n) if n >= 1 => count = usize::try_from(n).unwrap_or(usize::MAX).min(100_000),
                Some(_) => return Ok(syntax_error()),
                None => return Ok(not_integer()),
            },
            b"TYPE" => type_ok = arg.eq_ignore_ascii_case(b"string"),
            _ => return Ok(syntax_error()),
        }
        i += 2;
    }
    let (keys, next) = sh.store.keys_from(&start, count)?;
    let candidates: Vec<Vec<u8>> = keys
        .into_iter()
        .filter(|k| type_ok && pattern.is_none_or(|p| glob::matches(p, k)))
        .collect();
    // A key whose value cannot be read or decoded is listed (it exists; a GET of it
    // reports the damage) rather than failing the whole page and every scan past it.
    let live = sh.store.live_or_unreadable(&candidates)?;
    let found = candidates
        .into_iter()
        .zip(live)
        .filter(|&(_, l)| l)
        .map(|(k, _)| Reply::Bulk(k))
        .collect();
    let cursor = next.map_or_else(|| "0".to_string(), |k| sh.cursors.encode(&k));
    Ok(Reply::Array(vec![Reply::bulk(cursor), Reply::Array(found)]))
}

pub(super) fn dbsize(sh: &Shared, _: &mut Client, _: Args<'_>) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        i64::try_from(sh.store.count_keys()?).unwrap_or(i64::MAX),
    ))
}

/// FLUSHDB / FLUSHALL: refused unless the server was started with `--enable-flushdb`
/// (one stray command would delete every key, and unlike Redis there is no RDB to restore).
pub(super) fn flushdb(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    if a.len() > 2
        || a.get(1)
            .is_some_and(|m| !m.eq_ignore_ascii_case(b"sync") && !m.eq_ignore_ascii_case(b"async"))
    {
        return Ok(syntax_error());
    }
    if !sh.config.enable_flushdb {
        return Ok(Reply::err(
            "ERR FLUSHDB is disabled on this server: start wisckey serve with --enable-flushdb",
        ));
    }
    sh.store.flush_all(10_000)?;
    Ok(Reply::OK)
}
