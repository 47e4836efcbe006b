//! Connection and server commands: PING, ECHO, AUTH, HELLO, SELECT, CLIENT, COMMAND,
//! CONFIG GET, INFO. These read or change the [`Client`] and report on the server; none
//! writes the keyspace.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::{syntax_error, wrong_args, Client, Shared, COMMANDS};
use crate::error::Error;
use crate::glob;
use crate::resp::Reply;

type Args<'a> = &'a [Vec<u8>];

/// The Redis version reported to clients (some check it before using a command).
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";

pub(super) fn ping(_: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(match a.len() {
        1 => Reply::Simple("PONG"),
        2 => Reply::Bulk(a[1].clone()),
        _ => wrong_args("ping"),
    })
}

pub(super) fn echo(_: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(Reply::Bulk(a[1].clone()))
}

/// The SHA-256 digest passwords are compared by (Redis 6+ compares hashed passwords too).
pub fn password_digest(password: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(password).into()
}

/// Compares in time that depends only on the lengths, never on where the bytes differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..n {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    // The optimiser may not shortcut this: black_box hides the accumulated value.
    std::hint::black_box(diff) == 0
}

fn try_auth(sh: &Shared, client: &mut Client, user: Option<&[u8]>, pass: &[u8]) -> Option<Reply> {
    let user_ok = user.is_none_or(|u| u == b"default");
    // Compared by digests of a fixed size, the configured one made once
    // (`Shared::password_digest`): comparing the passwords themselves took time that told
    // the configured one's length.
    let Some(expected) = &sh.password_digest else {
        // No password: the default user takes any (Redis's `nopass`), but the one-argument
        // form is a mistake worth naming.
        return match user {
            None => Some(Reply::err(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            )),
            Some(_) if user_ok => None,
            Some(_) => Some(Reply::err(
                "WRONGPASS invalid username-password pair or user is disabled.",
            )),
        };
    };
    if constant_time_eq(&password_digest(pass), expected) && user_ok {
        client.authed = true;
        None
    } else {
        Some(Reply::err(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

pub(super) fn auth(sh: &Shared, client: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let reply = match a.len() {
        2 => try_auth(sh, client, None, &a[1]),
        3 => try_auth(sh, client, Some(&a[1]), &a[2]),
        _ => Some(syntax_error()),
    };
    Ok(reply.unwrap_or(Reply::OK))
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 or RESP3. RESP3 changes only
/// how nil and maps are written (see `resp.rs`); the commands reply the same values.
pub(super) fn hello(sh: &Shared, client: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let mut resp3 = client.resp3;
    if let Some(v) = a.get(1) {
        match crate::resp::parse_int(v) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return Ok(Reply::err("NOPROTO unsupported protocol version")),
            None => {
                return Ok(Reply::err(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        }
    }
    let mut i = 2;
    let mut name = None;
    // Every option is checked before the credentials are tried (the last AUTH pair counts),
    // as Redis 7 does: a HELLO refused for a later option must not leave the connection
    // authenticated.
    let mut credentials = None;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"AUTH" if i + 2 < a.len() => {
                credentials = Some((&a[i + 1], &a[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                match client_name(&a[i + 1]) {
                    Ok(valid) => name = Some(valid),
                    Err(refused) => return Ok(refused),
                }
                i += 2;
            }
            // Redis 7's text names the option (an unknown one, or one short of its
            // arguments).
            _ => {
                return Ok(Reply::err(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&a[i])
                )))
            }
        }
    }
    if let Some((user, pass)) = credentials {
        if let Some(refused) = try_auth(sh, client, Some(user), pass) {
            return Ok(refused);
        }
    }
    if !client.authed {
        return Ok(Reply::err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(name) = name {
        client.name = name;
    }
    client.resp3 = resp3;
    let field = |k: &'static str, v: Reply| (Reply::bulk(k), v);
    Ok(Reply::Map(vec![
        field("server", Reply::bulk("redis")),
        field("version", Reply::bulk(REDIS_COMPAT_VERSION)),
        field("proto", Reply::Integer(if resp3 { 3 } else { 2 })),
        field("id", Reply::Integer(client.id as i64)),
        field("mode", Reply::bulk("standalone")),
        field("role", Reply::bulk("master")),
        field("modules", Reply::Array(vec![])),
    ]))
}

pub(super) fn select(_: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    Ok(match crate::resp::parse_int(&a[1]) {
        Some(0) => Reply::OK,
        Some(_) => Reply::err("ERR DB index is out of range"),
        None => super::not_integer(),
    })
}

pub(super) fn client(_: &Shared, client: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let sub = a[1].to_ascii_uppercase();
    Ok(match (sub.as_slice(), a.len()) {
        (b"SETNAME", 3) => match client_name(&a[2]) {
            Ok(name) => {
                client.name = name;
                Reply::OK
            }
            Err(refused) => refused,
        },
        (b"GETNAME", 2) => client.name.clone().map_or(Reply::Nil, Reply::Bulk),
        (b"ID", 2) => Reply::Integer(client.id as i64),
        // Client libraries announce themselves; accepted and not kept.
        (b"SETINFO", 4) => Reply::OK,
        (b"SETNAME" | b"GETNAME" | b"ID" | b"SETINFO", _) => Reply::err(format!(
            "ERR wrong number of arguments for 'client|{}' command",
            String::from_utf8_lossy(&sub).to_lowercase()
        )),
        _ => Reply::err(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&a[1])
        )),
    })
}

/// A client name as CLIENT SETNAME and HELLO ... SETNAME take it (one rule for both, as in
/// Redis): `None` for the empty name (clears it); refused if it has spaces, newlines or
/// other bytes outside printable ASCII, which would break CLIENT LIST-style output.
fn client_name(raw: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    if raw.iter().any(|&c| c <= b' ' || c > b'~') {
        return Err(Reply::err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok((!raw.is_empty()).then(|| raw.to_vec()))
}

fn command_info(spec: &super::Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(spec.arity),
        Reply::Array(spec.flags.iter().map(|f| Reply::Simple(f)).collect()),
        Reply::Integer(spec.keys.0),
        Reply::Integer(spec.keys.1),
        Reply::Integer(spec.keys.2),
    ])
}

/// COMMAND, COMMAND COUNT, COMMAND INFO [name...], COMMAND DOCS (an empty map: no docs kept).
pub(super) fn command(_: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let Some(sub) = a.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
    };
    Ok(match sub.to_ascii_uppercase().as_slice() {
        b"COUNT" if a.len() > 2 => wrong_args("command|count"),
        b"COUNT" => Reply::Integer(COMMANDS.len() as i64),
        // Redis 7: no names means every command.
        b"INFO" if a.len() == 2 => Reply::Array(COMMANDS.iter().map(command_info).collect()),
        b"INFO" => Reply::Array(
            a[2..]
                .iter()
                .map(|n| super::lookup(n).map_or(Reply::Nil, command_info))
                .collect(),
        ),
        // A map, as Redis answers (no docs are kept, so an empty one).
        b"DOCS" => Reply::Map(vec![]),
        _ => Reply::err(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )),
    })
}

/// CONFIG GET pattern...: the parameters clients and redis-benchmark ask about.
pub(super) fn config(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    if !a[1].eq_ignore_ascii_case(b"get") {
        return Ok(Reply::err(format!(
            "ERR unknown subcommand '{}'. Only CONFIG GET is supported.",
            String::from_utf8_lossy(&a[1])
        )));
    }
    if a.len() < 3 {
        return Ok(wrong_args("config|get"));
    }
    let c = &sh.config;
    let params: Vec<(&str, String)> = vec![
        ("appendfsync", c.appendfsync.name().to_string()),
        ("appendonly", "yes".to_string()),
        ("bind", c.bind.ip().to_string()),
        (
            "client-query-buffer-limit",
            c.limits.max_query_len.to_string(),
        ),
        ("databases", "1".to_string()),
        ("maxclients", c.max_clients.to_string()),
        ("maxmemory", "0".to_string()),
        ("port", c.bind.port().to_string()),
        ("proto-max-bulk-len", c.limits.max_bulk_len.to_string()),
        ("save", String::new()),
        (
            "timeout",
            c.idle_timeout.map_or(0, |d| d.as_secs()).to_string(),
        ),
    ];
    // As Redis 7: a name without glob characters is looked up ignoring case and answered
    // under the name as asked; a pattern answers the canonical names it matches. Each
    // parameter once.
    let mut out = Vec::new();
    let mut answered = vec![false; params.len()];
    for pattern in &a[2..] {
        let lower = pattern.to_ascii_lowercase();
        let exact = !lower.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        for (i, (name, value)) in params.iter().enumerate() {
            let hit = if exact {
                lower == name.as_bytes()
            } else {
                glob::matches(&lower, name.as_bytes())
            };
            if hit && !answered[i] {
                answered[i] = true;
                let asked = if exact {
                    pattern.clone()
                } else {
                    name.as_bytes().to_vec()
                };
                out.push((Reply::Bulk(asked), Reply::bulk(value.as_str())));
            }
        }
    }
    Ok(Reply::Map(out))
}

/// INFO keyspace's counts: a keys-only scan of every key (O(keys)), reused for
/// `Config::info_keyspace_refresh`. One caller scans at a time; the others wait for its
/// result instead of scanning too.
fn keyspace_counts(sh: &Shared) -> Result<super::KeyspaceCounts, Error> {
    let count = || -> Result<super::KeyspaceCounts, Error> {
        let keys = sh.store.count_keys()?;
        let expires = sh.store.count_expiry_entries()?.min(keys);
        Ok(super::KeyspaceCounts {
            at: std::time::Instant::now(),
            keys,
            expires,
        })
    };
    if sh.store.in_transaction() {
        // Inside EXEC the counts include the transaction's own writes, which are not
        // committed yet: counted for this reply alone, neither taken from nor left in the
        // shared ones.
        return count();
    }
    let mut last = (sh.stats.keyspace.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
    match *last {
        Some(counts) if counts.at.elapsed() < sh.config.info_keyspace_refresh => Ok(counts),
        _ => {
            let counts = count()?;
            *last = Some(counts);
            Ok(counts)
        }
    }
}

/// INFO [section...]: server, clients, persistence, stats, keyspace and the engine's own
/// section (`wisckey`: levels, value log, space amplification, GC). `keyspace` counts keys
/// with a keys-only scan, O(keys), whose result is reused for
/// `Config::info_keyspace_refresh` (5 s by default); `expires` is an upper bound (see
/// [`super::KeyspaceCounts`]).
pub(super) fn info(sh: &Shared, _: &mut Client, a: Args<'_>) -> Result<Reply, Error> {
    let wanted: Vec<String> = a[1..]
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "everything" || w == "default");
    let want = |s: &str| all || wanted.iter().any(|w| w == s);
    let mut out = String::new();
    let st = &sh.stats;
    // Writing to a String cannot fail; the results are ignored for that reason.
    if want("server") {
        let up = sh.started.elapsed().as_secs();
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_COMPAT_VERSION}\r\nwisckey_version:{}\r\n\
             redis_mode:standalone\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\n\
             uptime_in_seconds:{up}\r\nuptime_in_days:{}\r\nserving_threads:{}\r\n\
             commits_on_event_loop:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            sh.config.bind.port(),
            up / 86_400,
            sh.serving_threads,
            u8::from(sh.single_loop)
        );
    }
    if want("clients") {
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\ntotal_watched_keys:{}\r\n\r\n",
            st.connected_clients.load(Ordering::Relaxed),
            sh.config.max_clients,
            sh.store.watches().count()
        );
    }
    if want("persistence") {
        let _ = write!(
            out,
            "# Persistence\r\nloading:0\r\naof_enabled:1\r\nappendfsync:{}\r\n\r\n",
            sh.config.appendfsync.name()
        );
    }
    if want("stats") {
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nexpired_keys:{}\r\nexpire_sweeps_read:{}\r\n\
             slow_read_batches:{}\r\n\r\n",
            st.connections_received.load(Ordering::Relaxed),
            st.commands_processed.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            sh.store.expired_keys.load(Ordering::Relaxed),
            sh.store.sweep_scans(),
            st.slow_read_batches.load(Ordering::Relaxed)
        );
    }
    if want("wisckey") {
        let s = sh.store.db().stats()?;
        let _ = write!(out, "# Wisckey\r\n");
        for (level, (files, bytes)) in s.level_files.iter().zip(s.level_bytes.iter()).enumerate() {
            let _ = write!(out, "level{level}:files={files},bytes={bytes}\r\n");
        }
        let v = &s.value_log;
        let _ = write!(
            out,
            "vlog_segments:{}\r\nvlog_bytes:{}\r\nvlog_live_bytes:{}\r\nspace_amp:{:.3}\r\n\
             space_amp_target:{:.3}\r\ngc_runs:{}\r\ngc_bytes_freed:{}\r\ngc_bytes_punched:{}\r\n\
             gc_rewritten_per_freed:{:.3}\r\nauto_cluster_passes:{}\r\n\
             auto_cluster_bytes_relocated:{}\r\ndisk_reserve_bytes:{}\r\n\r\n",
            v.segments.len(),
            v.log_bytes,
            v.live_bytes,
            v.space_amp,
            v.space_amp_target,
            s.gc.runs,
            s.gc.bytes_freed,
            s.gc.bytes_punched,
            s.gc.rewritten_per_freed,
            s.auto_cluster.passes,
            s.auto_cluster.work.bytes_relocated,
            s.disk_reserve_bytes
        );
    }
    if want("keyspace") {
        let counts = keyspace_counts(sh)?;
        let _ = write!(out, "# Keyspace\r\n");
        if counts.keys > 0 {
            let _ = write!(
                out,
                "db0:keys={},expires={},avg_ttl=0\r\n",
                counts.keys, counts.expires
            );
        }
    }
    Ok(Reply::Bulk(out.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret!"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}
