//! String commands: GET, SET (EX/PX/EXAT/PXAT/NX/XX/GET/KEEPTTL), SETNX, SETEX, GETDEL,
//! MGET, MSET, INCR/INCRBY/DECR/DECRBY, APPEND, STRLEN.
//!
//! Every write holds its key's stripe lock (see `store.rs`); read-modify-write commands
//! hold it across the read and the write, which is what makes INCR atomic per key.

use super::{check_key, check_value, not_integer, syntax_error, wrong_args, Client, Shared};
use crate::error::Error;
use crate::resp::{parse_int, Reply};
use crate::store::now_ms;

type Args<'a> = &'a [Vec<u8>];

pub(super) fn get(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(match sh.store.get(&a[1])? {
        Some(s) => Reply::Bulk(s.data),
        None => Reply::Nil,
    })
}

/// An absolute expiry in ms from a relative or absolute time argument; `None` if it is
/// not a positive integer or overflows.
fn expiry_ms(arg: &[u8], unit_ms: u64, absolute: bool, now: u64) -> Option<u64> {
    let n = parse_int(arg)?;
    if n <= 0 {
        return None;
    }
    let ms = u64::try_from(n).ok()?.checked_mul(unit_ms)?;
    let at = if absolute { ms } else { now.checked_add(ms)? };
    // Keep within i64 so PTTL arithmetic and clients' signed integers never overflow.
    (at <= i64::MAX as u64).then_some(at)
}

pub(super) fn set(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let (key, value) = (&a[1], &a[2]);
    if let Some(e) = check_key(key).or_else(|| check_value(value)) {
        return Ok(e);
    }
    let now = now_ms();
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    // Which of EX/PX/EXAT/PXAT was given, and its argument: as in Redis, repeating it is
    // allowed (the last wins), mixing two is not, and its argument is checked only after
    // every option parsed (a syntax error anywhere comes first).
    let mut expiry: Option<(Vec<u8>, &Vec<u8>)> = None;
    let mut i = 3;
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if expiry.is_none() => keepttl = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT"
                if !keepttl && expiry.as_ref().is_none_or(|(o, _)| *o == opt) =>
            {
                let Some(arg) = a.get(i + 1) else {
                    return Ok(syntax_error());
                };
                expiry = Some((opt, arg));
                i += 1;
            }
            _ => return Ok(syntax_error()),
        }
        i += 1;
    }
    let expires = match &expiry {
        None => None,
        Some((opt, arg)) => {
            if parse_int(arg).is_none() {
                return Ok(not_integer());
            }
            let unit = if opt.starts_with(b"E") { 1000 } else { 1 };
            match expiry_ms(arg, unit, opt.ends_with(b"AT"), now) {
                Some(at) => Some(at),
                None => return Ok(Reply::err("ERR invalid expire time in 'set' command")),
            }
        }
    };
    let guard = sh.store.lock(&[key]);
    if !(nx || xx || get || keepttl) {
        sh.store.put(&guard, key, value, expires)?;
        return Ok(Reply::OK);
    }
    let old = sh.store.get(key)?;
    let proceed = !(nx && old.is_some() || xx && old.is_none());
    if proceed {
        let expires = if keepttl {
            old.as_ref().and_then(|o| o.expires_at_ms)
        } else {
            expires
        };
        sh.store.put(&guard, key, value, expires)?;
    }
    Ok(match (get, proceed) {
        (true, _) => old.map_or(Reply::Nil, |o| Reply::Bulk(o.data)),
        (false, true) => Reply::OK,
        (false, false) => Reply::Nil,
    })
}

pub(super) fn setnx(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let (key, value) = (&a[1], &a[2]);
    if let Some(e) = check_key(key).or_else(|| check_value(value)) {
        return Ok(e);
    }
    let guard = sh.store.lock(&[key]);
    if sh.store.get(key)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    sh.store.put(&guard, key, value, None)?;
    Ok(Reply::Integer(1))
}

pub(super) fn setex(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let (key, value) = (&a[1], &a[3]);
    if let Some(e) = check_key(key).or_else(|| check_value(value)) {
        return Ok(e);
    }
    if parse_int(&a[2]).is_none() {
        return Ok(not_integer());
    }
    let Some(at) = expiry_ms(&a[2], 1000, false, now_ms()) else {
        return Ok(Reply::err("ERR invalid expire time in 'setex' command"));
    };
    let guard = sh.store.lock(&[key]);
    sh.store.put(&guard, key, value, Some(at))?;
    Ok(Reply::OK)
}

pub(super) fn getdel(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let key = &a[1];
    let guard = sh.store.lock(&[key]);
    match sh.store.get(key)? {
        None => Ok(Reply::Nil),
        Some(old) => {
            sh.store.delete(&guard, &[key])?;
            Ok(Reply::Bulk(old.data))
        }
    }
}

pub(super) fn mget(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    // A reply no larger than the largest request a client may send: a short MGET of one
    // large key repeated must not ask for its size in memory per repetition.
    let budget = sh.config.limits.max_query_len;
    let Some(values) = sh.store.multi_get_within(&a[1..], budget)? else {
        return Ok(Reply::err(format!(
            "ERR MGET reply would exceed {budget} bytes (the query buffer limit); ask for fewer keys"
        )));
    };
    Ok(Reply::Array(
        values
            .into_iter()
            .map(|v| v.map_or(Reply::Nil, |s| Reply::Bulk(s.data)))
            .collect(),
    ))
}

/// MSET: every pair in one atomic write batch (all or nothing, one sync in `always`).
pub(super) fn mset(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    if (a.len() - 1) % 2 != 0 {
        return Ok(wrong_args("mset"));
    }
    let pairs = || a[1..].chunks_exact(2).map(|p| (&p[0][..], &p[1][..]));
    if let Some(e) = pairs().find_map(|(k, v)| check_key(k).or_else(|| check_value(v))) {
        return Ok(e);
    }
    let keys: Vec<&Vec<u8>> = a[1..].iter().step_by(2).collect();
    let guard = sh.store.lock(&keys);
    sh.store.put_many(&guard, pairs())?;
    Ok(Reply::OK)
}

fn add(sh: &Shared, key: &[u8], delta: i64) -> Result<Reply, Error> {
    if let Some(e) = check_key(key) {
        return Ok(e);
    }
    let guard = sh.store.lock(&[key]);
    let old = sh.store.get(key)?;
    let (current, expires) = match &old {
        None => (0, None),
        Some(s) => match parse_int(&s.data) {
            Some(n) => (n, s.expires_at_ms),
            None => return Ok(not_integer()),
        },
    };
    let Some(new) = current.checked_add(delta) else {
        return Ok(Reply::err("ERR increment or decrement would overflow"));
    };
    sh.store
        .put(&guard, key, new.to_string().as_bytes(), expires)?;
    Ok(Reply::Integer(new))
}

pub(super) fn incr(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    add(sh, &a[1], 1)
}

pub(super) fn decr(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    add(sh, &a[1], -1)
}

pub(super) fn incrby(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    match parse_int(&a[2]) {
        Some(d) => add(sh, &a[1], d),
        None => Ok(not_integer()),
    }
}

pub(super) fn decrby(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    match parse_int(&a[2]) {
        Some(i64::MIN) => Ok(Reply::err("ERR decrement would overflow")),
        Some(d) => add(sh, &a[1], -d),
        None => Ok(not_integer()),
    }
}

pub(super) fn append(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let key = &a[1];
    if let Some(e) = check_key(key) {
        return Ok(e);
    }
    let guard = sh.store.lock(&[key]);
    let (mut data, expires) = match sh.store.get(key)? {
        None => (Vec::new(), None),
        Some(s) => (s.data, s.expires_at_ms),
    };
    data.extend_from_slice(&a[2]);
    if let Some(e) = check_value(&data) {
        return Ok(e);
    }
    sh.store.put(&guard, key, &data, expires)?;
    Ok(Reply::Integer(data.len() as i64))
}

pub(super) fn strlen(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        sh.store.get(&a[1])?.map_or(0, |s| s.data.len() as i64),
    ))
}
