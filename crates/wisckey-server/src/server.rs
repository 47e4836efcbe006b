//! The network side: the listener, one task per connection, the background tasks (expiry
//! sweeper, the `everysec` syncer) and shutdown.
//!
//! Per connection, requests are decoded as they arrive and executed in order, a pipeline's
//! worth at a time; replies are written before more requests are read. Where a batch runs
//! (see `pipeline.rs`): only GETs/MGETs/PINGs on the connection's own task (on one event
//! loop, longer such batches on a reader thread; falling back to the blocking pool for a
//! while when a batch turns out to wait on the disk or copy large values); only plain
//! SET/MSET/INCR-family/GET commands on the executor, which commits every connection's
//! waiting writes together; anything else on a blocking thread. The executor is a thread
//! of its own on a multi-threaded runtime, and a task on a single-threaded one, where the
//! loop runs each round itself, sync included, as Redis's loop does: no thread hand-off
//! per request, at the price of the loop waiting for the sync (requests pile up in the
//! sockets meanwhile and make the next round).
//! Invariants that bound a client's memory: the server reads a client's socket only when
//! no decoded request is waiting and its replies have been written, so a client that does
//! not read its replies stops being read (its kernel buffers fill and its writes block);
//! the replies buffered at once stop growing at `output_buffer_limit` plus one reply; and
//! the decoder holds at most one partial request, bounded by the request limits.
//! A protocol error gets an `ERR Protocol error` reply and closes only that connection.
//!
//! Shutdown (SHUTDOWN, SIGINT/SIGTERM, or [`ShutdownHandle`]): stop accepting, let each
//! connection finish its current batch and close, stop the background tasks, then flush
//! the memtable and close the database.

/// A line on stderr that cannot fail: `eprintln!` panics when stderr is a pipe whose reader
/// went away (`wisckey serve 2>&1 | logger`, the logger gone), which would end the task that
/// logs (the accept loop, the everysec syncer) while the server goes on without it.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::cmd::{After, Client, Shared};
use crate::config::{AppendFsync, Config};
use crate::error::Error;
use crate::pipeline::{self, Batch, Job, ReadJob};
use crate::resp::{Decoder, Reply};
use crate::store::{Durability, Store};
use tokio::sync::mpsc::UnboundedSender;

/// Most requests decoded ahead of execution per connection.
const MAX_BATCH: usize = 1024;
/// How much the read buffer grows per read.
const READ_CHUNK: usize = 64 << 10;
/// Read-only batches of at most this many keys (a GET reads one, an MGET each of its keys)
/// run on the connection's task; longer ones on the blocking pool. Measured (GET, 50
/// clients): a single GET inline instead of on the pool gave 1.4-2x the throughput. 16 pipelined GETs: on 2026-11-25 (a busy
/// machine) ~10% faster on the pool; on 2026-11-26 (quiet, three interleaved rounds) 1 KiB
/// values inline 1.09-1.14x the pool's rate at 14% less server CPU per GET, 16 KiB values
/// 0.90-1.10x (no difference). Data on disk is caught by [`SLOW_INLINE`].
const INLINE_MAX: usize = 32;
/// [`INLINE_MAX`] on a single-threaded runtime: there, longer read batches go to the
/// reader thread so they use another core while the loop goes on. Measured (16 pipelined
/// 1 KiB GETs, 50 clients, two cores shared with the client, two rounds): the blocking
/// pool 1.15-1.38x the rate of running them on the loop; the reader thread 1.28-1.42x the
/// pool's, at 0.6-0.7x its CPU per GET (three rounds, 2026-11-30; docs/BENCHMARKS.md).
const INLINE_MAX_SINGLE_LOOP: usize = 4;
/// A read-only batch run on the connection's thread (or the reader thread) that takes
/// longer than this, and read from the disk (or ran an MGET, whose reads other threads
/// make) or copied large values ([`pipeline::ran_slow`]),...
const SLOW_INLINE: Duration = Duration::from_micros(500);
/// ...sends that connection's next this many batches to the blocking pool.
const POOL_BATCHES_AFTER_SLOW: u32 = 64;
/// How many expiry-index entries one sweeper step examines.
const SWEEP_BATCH: usize = 1000;

/// A bound server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Asks a running server to shut down (as SHUTDOWN does). Does not keep the server alive.
#[derive(Debug, Clone)]
pub struct ShutdownHandle(Weak<Shared>);

impl ShutdownHandle {
    /// Starts the shutdown; [`Server::run`] returns once the database is closed.
    pub fn shutdown(&self) {
        if let Some(shared) = self.0.upgrade() {
            shared.shutdown.send_replace(true);
        }
    }
}

fn join_error(e: tokio::task::JoinError) -> Error {
    Error::Io(std::io::Error::other(format!("a server task failed: {e}")))
}

impl Server {
    /// Opens (or creates) the database and binds the listening socket.
    pub async fn bind(mut config: Config) -> Result<Server, Error> {
        config.validate().map_err(Error::Config)?;
        let (clients, tables) =
            share_file_handles(raise_file_limit(), config.max_clients, &config.engine);
        if (clients, tables) != (config.max_clients, config.engine.max_open_tables) {
            say!(
                "wisckey serve: the open-file limit (ulimit -n) cannot hold {} clients and {} \
                 open tables beside the database's other handles: maxclients {clients}, open \
                 tables {tables}",
                config.max_clients,
                config.engine.max_open_tables
            );
            config.max_clients = clients;
            config.engine.max_open_tables = tables;
        }
        let (dir, engine) = (config.db_dir.clone(), config.engine.clone());
        let max_batch_size = engine.max_batch_size;
        let durability = if config.appendfsync == AppendFsync::Always {
            Durability::BeforeReply
        } else {
            Durability::Eventually
        };
        // The socket first: a port in use must not leave behind a new, empty database that
        // the failed start created.
        let listener = TcpListener::bind(config.bind).await.map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("cannot listen on {}: {e}", config.bind),
            ))
        })?;
        let store = tokio::task::spawn_blocking(move || -> Result<Store, Error> {
            Store::new(wisckey::Db::open(dir, engine)?, durability, max_batch_size)
        })
        .await
        .map_err(join_error)??;
        // With port 0 the OS picks one; report the real one (INFO, CONFIG GET port).
        config.bind = listener.local_addr()?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared::new(store, config)),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.config.bind
    }

    /// A handle that shuts the server down.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(Arc::downgrade(&self.shared))
    }

    /// Serves clients until shut down, then flushes and closes the database.
    pub async fn run(self) -> Result<(), Error> {
        let Server { listener, shared } = self;
        let mut stop = shared.shutdown.subscribe();
        let mut background = JoinSet::new();
        background.spawn(sweeper(Arc::clone(&shared)));
        if shared.config.appendfsync == AppendFsync::Everysec {
            background.spawn(syncer(Arc::clone(&shared)));
        }
        // On a single-threaded runtime the loop commits the writes itself (Redis's model);
        // on a multi-threaded one an executor thread does, so no worker blocks in a sync.
        // One executor thread: two (a round executing while the previous one syncs)
        // measured no better on two cores.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut executor = Some(if shared.single_loop {
            let task = tokio::spawn(pipeline::commit_on_loop(Arc::clone(&shared), rx));
            (tx, Committer::Loop(task))
        } else {
            let threads = pipeline::spawn_executor(Arc::clone(&shared), rx, 1)?;
            (tx, Committer::Threads(threads))
        });
        // On a single-threaded runtime, read batches too long for the loop go to a reader
        // thread of their own.
        let mut reader = if shared.single_loop {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            Some((
                tx,
                pipeline::spawn_reader(Arc::clone(&shared), rx, SLOW_INLINE)?,
            ))
        } else {
            None
        };
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let lanes = Lanes {
                            exec: executor.as_ref().map(|e| &e.0),
                            reader: reader.as_ref().map(|r| &r.0),
                        };
                        accept(&shared, lanes, &mut conns, stream)
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: keep serving the others.
                        say!("wisckey serve: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while conns.join_next().await.is_some() {}
        });
        if drained.await.is_err() {
            conns.shutdown().await;
        }
        background.shutdown().await;
        if let Some((sender, thread)) = reader.take() {
            drop(sender);
            let joined = tokio::task::spawn_blocking(move || thread.join())
                .await
                .map_err(join_error)?;
            if joined.is_err() {
                say!("wisckey serve: the reader thread panicked");
            }
        }
        // Every connection has ended: dropping the last sender ends the executor (thread
        // or task), which holds the shared state.
        if let Some((sender, committer)) = executor.take() {
            drop(sender);
            let threads = match committer {
                Committer::Threads(threads) => threads,
                Committer::Loop(task) => {
                    if task.await.is_err() {
                        say!("wisckey serve: the commit task panicked");
                    }
                    Vec::new()
                }
            };
            for thread in threads {
                let joined = tokio::task::spawn_blocking(move || thread.join())
                    .await
                    .map_err(join_error)?;
                if joined.is_err() {
                    say!("wisckey serve: an executor thread panicked");
                }
            }
        }
        close(shared).await
    }
}

/// Where batched writes are committed.
enum Committer {
    /// Executor threads beside the runtime's workers.
    Threads(Vec<std::thread::JoinHandle<()>>),
    /// A task on the single-threaded runtime's own loop.
    Loop(tokio::task::JoinHandle<()>),
}

/// Waits for the last user of the database (a blocking command still running) and closes
/// it; if that takes too long, flushes and syncs instead so nothing acknowledged is lost.
async fn close(mut shared: Arc<Shared>) -> Result<(), Error> {
    for _ in 0..300 {
        match Arc::try_unwrap(shared) {
            Ok(owned) => {
                let db = owned.store.into_db();
                return tokio::task::spawn_blocking(move || -> Result<(), Error> {
                    db.flush()?;
                    Ok(db.close()?)
                })
                .await
                .map_err(join_error)?;
            }
            Err(still_shared) => shared = still_shared,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::task::spawn_blocking(move || -> Result<(), Error> {
        shared.store.db().flush()?;
        Ok(shared.store.db().sync()?)
    })
    .await
    .map_err(join_error)??;
    Err(Error::Io(std::io::Error::other(
        "the database was flushed and synced but not closed: a command did not finish",
    )))
}

/// Where a connection sends the batches it does not run itself.
#[derive(Clone, Copy)]
struct Lanes<'a> {
    /// The executor (batched writes).
    exec: Option<&'a UnboundedSender<Job>>,
    /// The reader thread (long read batches, single-threaded runtime only).
    reader: Option<&'a UnboundedSender<ReadJob>>,
}

fn accept(shared: &Arc<Shared>, lanes: Lanes<'_>, conns: &mut JoinSet<()>, stream: TcpStream) {
    let stats = &shared.stats;
    stats.connections_received.fetch_add(1, Ordering::Relaxed);
    if stats.connected_clients.load(Ordering::Relaxed) >= shared.config.max_clients {
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        // One non-blocking attempt: a refused client gets no more of our time.
        let _ = stream.try_write(b"-ERR max number of clients reached\r\n");
        return;
    }
    stats.connected_clients.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::clone(shared);
    let exec = lanes.exec.cloned();
    let reader = lanes.reader.cloned();
    conns.spawn(async move {
        let _counted = Connected(Arc::clone(&shared));
        let lanes = Lanes {
            exec: exec.as_ref(),
            reader: reader.as_ref(),
        };
        // A connection's I/O error ends that connection only.
        let _ = connection(shared, lanes, stream).await;
    });
}

/// Decrements the connected-client count however the connection task ends.
struct Connected(Arc<Shared>);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0
            .stats
            .connected_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

fn executor_gone() -> Error {
    Error::Io(std::io::Error::other("the executor thread has stopped"))
}

fn reader_gone() -> Error {
    Error::Io(std::io::Error::other(
        "the reader thread has stopped, or a read batch failed on it",
    ))
}

async fn connection(
    shared: Arc<Shared>,
    lanes: Lanes<'_>,
    mut stream: TcpStream,
) -> Result<(), Error> {
    stream.set_nodelay(true)?;
    let config = &shared.config;
    let idle = config.idle_timeout;
    let mut stop = shared.shutdown.subscribe();
    let inline_max = if shared.single_loop {
        INLINE_MAX_SINGLE_LOOP
    } else {
        INLINE_MAX
    };
    let mut decoder = Decoder::new(config.limits);
    // Whether the decoder enforces the full limits (see `Limits::unauthenticated`).
    let mut full_limits = true;
    let mut input: Vec<u8> = Vec::new();
    // While above zero, read-only batches also go to the blocking pool (see below).
    let mut slow_reads = 0u32;
    let mut batch = Batch {
        client: Client {
            id: shared.client_id(),
            name: None,
            authed: config.requirepass.is_none(),
            resp3: false,
            multi: None,
            watched: None,
        },
        pending: VecDeque::new(),
        out: Vec::new(),
        after: After::Continue,
    };
    loop {
        // Decode what has arrived (at most MAX_BATCH requests).
        let mut pos = 0;
        let mut protocol_error = None;
        let authed = batch.client.authed;
        if authed != full_limits && !decoder.in_request() {
            full_limits = authed;
            decoder.set_limits(if authed {
                config.limits
            } else {
                config.limits.unauthenticated()
            });
        }
        // Before AUTH, one request at a time: the one after AUTH is decoded with the full
        // limits once AUTH has run.
        let max_batch = if full_limits { MAX_BATCH } else { 1 };
        while batch.pending.len() < max_batch {
            match decoder.next(&input, &mut pos) {
                Ok(Some(args)) if args.is_empty() => {}
                Ok(Some(args)) => batch.pending.push_back(args),
                Ok(None) => break,
                Err(e) => {
                    protocol_error = Some(e);
                    break;
                }
            }
        }
        input.drain(..pos);
        trim_input(&mut input);
        // Stopped at the batch limit: more complete requests may be in `input` already.
        let full = batch.pending.len() >= max_batch;
        // Execute, writing replies whenever they reach the output-buffer limit.
        while !batch.pending.is_empty() {
            let limit = config.output_buffer_limit;
            let reads = pipeline::read_only(&batch.client, &batch.pending);
            if reads && slow_reads == 0 && pipeline::keys_read(&batch.pending) <= inline_max {
                // Reads of in-memory data take microseconds: run them here rather than pay
                // for a hand-off to the blocking pool. If they turn out slow waiting on
                // the disk or copying large values, send this connection's batches to the
                // pool for a while so one client cannot hold a reactor thread.
                let (began, replies_before) = (Instant::now(), batch.out.len());
                let ran_mget = pipeline::run_reads(&shared, &mut batch, limit);
                let replied = batch.out.len() - replies_before;
                if pipeline::ran_slow(began, SLOW_INLINE, replied, ran_mget) {
                    slow_reads = POOL_BATCHES_AFTER_SLOW;
                    (shared.stats.slow_read_batches).fetch_add(1, Ordering::Relaxed);
                }
                if shared.store.needs_sync() {
                    let sh = Arc::clone(&shared);
                    let durable = tokio::task::spawn_blocking(move || sh.store.make_durable())
                        .await
                        .map_err(join_error)?;
                    if let Err(e) = durable {
                        batch.out.clear();
                        Reply::err(format!("ERR {e}")).encode(&mut batch.out);
                        batch.pending.clear();
                        batch.after = After::Close;
                    }
                }
            } else if let Some(exec) = lanes
                .exec
                .filter(|_| !reads && pipeline::all_fast(&batch.client, &batch.pending))
            {
                let (done, result) = tokio::sync::oneshot::channel();
                let job = Job {
                    resp3: batch.client.resp3,
                    pending: std::mem::take(&mut batch.pending),
                    out: std::mem::take(&mut batch.out),
                    limit,
                    done,
                };
                if exec.send(job).is_err() {
                    return Err(executor_gone());
                }
                let (pending, out, after) = result.await.map_err(|_| executor_gone())?;
                (batch.pending, batch.out) = (pending, out);
                if after != After::Continue {
                    batch.after = after;
                }
            } else if let Some(reader) = lanes.reader.filter(|_| reads && slow_reads == 0) {
                let (done, result) = tokio::sync::oneshot::channel();
                let job = ReadJob { batch, limit, done };
                if reader.send(job).is_err() {
                    return Err(reader_gone());
                }
                let was_slow;
                (batch, was_slow) = result.await.map_err(|_| reader_gone())?;
                if was_slow {
                    slow_reads = POOL_BATCHES_AFTER_SLOW;
                }
            } else if reads {
                slow_reads = slow_reads.saturating_sub(1);
                let sh = Arc::clone(&shared);
                batch = tokio::task::spawn_blocking(move || {
                    pipeline::run_reads_durable(&sh, batch, limit)
                })
                .await
                .map_err(join_error)?;
            } else {
                let sh = Arc::clone(&shared);
                batch = tokio::task::spawn_blocking(move || pipeline::run_batch(&sh, batch, limit))
                    .await
                    .map_err(join_error)?;
            }
            if !batch.out.is_empty() {
                let out = std::mem::take(&mut batch.out);
                write_all_paced(idle, &mut stop, &mut stream, &out).await?;
                batch.out = out;
                batch.out.clear();
            }
            if batch.out.capacity() > 2 * limit.max(READ_CHUNK) {
                batch.out = Vec::new();
            }
        }
        match batch.after {
            After::Continue => {}
            After::Close => return Ok(()),
            After::Shutdown => {
                shared.shutdown.send_replace(true);
                return Ok(());
            }
        }
        if let Some(e) = protocol_error {
            let mut out = Vec::new();
            Reply::err(format!("ERR {e}")).encode(&mut out);
            write_all_paced(idle, &mut stop, &mut stream, &out).await?;
            return Ok(());
        }
        if full {
            continue;
        }
        // Everything decodable has been answered: read more, which may wait for good.
        trim_replies(&mut batch.out);
        input.reserve(READ_CHUNK);
        let n = with_deadline(idle, &mut stop, stream.read_buf(&mut input)).await?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// Input capacity above which [`trim_input`] looks at the buffer at all. Pipelines of
/// large values (16 SETs of 64 KiB are 1 MiB) stay under it, so their buffer is not freed
/// and regrown, with its pages faulted in again, on every batch.
const TRIM_INPUT_ABOVE: usize = 8 << 20;
/// Reply capacity above which [`trim_replies`] shrinks the buffer (see `TRIM_INPUT_ABOVE`).
const TRIM_REPLIES_ABOVE: usize = 8 << 20;
/// Reply capacity a connection keeps while it waits for requests ([`trim_replies`]).
const KEEP_REPLY_CAPACITY: usize = 1 << 20;

/// After a batch is decoded: gives back the memory of requests that came and went, keeping
/// the unread bytes. A 400 MB SET followed by two stray bytes must not keep 400 MB for the
/// connection's life (the idle timeout is off by default). A buffer still filling with a
/// large request is left alone: growth by doubling keeps its capacity under 4x its length
/// (once past [`TRIM_INPUT_ABOVE`]), so it is never shrunk and regrown while it arrives.
fn trim_input(input: &mut Vec<u8>) {
    let capacity = input.capacity();
    if capacity <= TRIM_INPUT_ABOVE {
        return;
    }
    if input.is_empty() {
        *input = Vec::new();
    } else if capacity > 4 * input.len() {
        input.shrink_to((2 * input.len()).max(READ_CHUNK));
    }
}

/// Before waiting for more requests (the replies are written): gives back a large reply
/// buffer, so a client that pipelined megabytes of replies and went quiet does not keep
/// them. Buffers up to [`TRIM_REPLIES_ABOVE`] are kept, so request/response traffic and
/// ordinary pipelines never reallocate.
fn trim_replies(out: &mut Vec<u8>) {
    if out.capacity() > TRIM_REPLIES_ABOVE {
        out.shrink_to(KEEP_REPLY_CAPACITY);
    }
}

/// Writes all of `out`, each write under the idle timeout: a client that reads a large
/// reply slowly but steadily is not idle (Redis counts each write as activity).
async fn write_all_paced(
    idle: Option<Duration>,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    stream: &mut TcpStream,
    out: &[u8],
) -> Result<(), Error> {
    let mut written = 0;
    while written < out.len() {
        let n = with_deadline(idle, stop, stream.write(&out[written..])).await?;
        if n == 0 {
            return Err(Error::Io(std::io::ErrorKind::WriteZero.into()));
        }
        written += n;
    }
    Ok(())
}

/// Runs an I/O future unless the idle timeout passes or the server shuts down first.
async fn with_deadline<T>(
    idle: Option<Duration>,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    io: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, Error> {
    let timed = async {
        match idle {
            Some(d) => tokio::time::timeout(d, io)
                .await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
            None => io.await,
        }
    };
    tokio::select! {
        r = timed => Ok(r?),
        _ = stop.wait_for(|s| *s) => Err(Error::Io(std::io::ErrorKind::Interrupted.into())),
    }
}

/// Deletes expired keys in the background so their space can be reclaimed.
async fn sweeper(shared: Arc<Shared>) {
    let mut stop = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(shared.config.sweep_interval) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        loop {
            let sh = Arc::clone(&shared);
            match tokio::task::spawn_blocking(move || sh.store.sweep(SWEEP_BATCH)).await {
                Ok(Ok(report)) => {
                    // Bounded by the entries a sweep examines: a value that does not
                    // decode is reported once, one the engine cannot read once per retry.
                    for line in &report.unreadable {
                        say!("wisckey serve: expiry sweep: {line}");
                    }
                    if report.examined < SWEEP_BATCH || *stop.borrow() {
                        break;
                    }
                }
                Ok(Err(e)) => {
                    say!("wisckey serve: expiry sweep: {e}");
                    break;
                }
                Err(e) => {
                    say!("wisckey serve: expiry sweep: {e}");
                    break;
                }
            }
        }
    }
}

/// `appendfsync everysec`: syncs the value log once a second.
async fn syncer(shared: Arc<Shared>) {
    let mut stop = shared.shutdown.subscribe();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let sh = Arc::clone(&shared);
        match tokio::task::spawn_blocking(move || sh.store.db().sync()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => say!("wisckey serve: everysec sync: {e}"),
            Err(e) => say!("wisckey serve: everysec sync: {e}"),
        }
    }
}

/// The runtime [`serve`] runs the server on: [`Config::serving_threads`] says which. One
/// thread: a current-thread runtime, on whose loop the batched writes are committed too.
/// More: a multi-threaded runtime with that many workers.
pub fn runtime(config: &Config) -> Result<tokio::runtime::Runtime, Error> {
    config.validate().map_err(Error::Config)?;
    let runtime = match config.serving_threads() {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("wisckey-serve")
            .build()?,
        workers => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .thread_name("wisckey-serve")
            .build()?,
    };
    Ok(runtime)
}

/// Runs the server from a configuration on its own runtime until SHUTDOWN or SIGINT /
/// SIGTERM; what `wisckey serve` calls. Prints where it listens to stderr.
pub fn serve(config: Config) -> Result<(), Error> {
    let runtime = runtime(&config)?;
    runtime.block_on(async move {
        let server = Server::bind(config).await?;
        let handle = server.shutdown_handle();
        tokio::spawn(async move {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        say!("wisckey serve: cannot watch SIGTERM: {e}");
                        return;
                    }
                };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            handle.shutdown();
        });
        say!(
            "wisckey serve: listening on {} (appendfsync {})",
            server.local_addr(),
            server.shared.config.appendfsync.name()
        );
        server.run().await
    })
}

/// File handles the database holds besides its tables and the clients' sockets: its
/// cached value-log segments (at most 256), one io_uring per reader thread, and a margin for
/// the manifest, the log writer, directories, the listener and the runtime.
fn engine_handles_besides_tables(engine: &wisckey::Options) -> u64 {
    const CACHED_SEGMENTS: u64 = 256;
    const MARGIN: u64 = 64;
    CACHED_SEGMENTS
        .saturating_add(engine.scan_readahead_threads as u64)
        .saturating_add(MARGIN)
}

/// How an open-file limit of `limit` is shared between clients and the database's open
/// tables: `(max_clients, max_open_tables)` as asked where both fit beside the database's
/// other handles, else lowered — the clients to at most half of what is left, the tables
/// to the rest — but neither below `FLOOR` (or what was asked, if less): a server that
/// takes one client is of no use, and a handle the database then lacks for a moment is
/// retried, not latched. A client past the limit took the handle a flush or a GC read
/// needed (EMFILE); Redis lowers `maxclients` for the same reason. A smaller table cache
/// only reopens tables more often.
fn share_file_handles(limit: u64, max_clients: usize, engine: &wisckey::Options) -> (usize, usize) {
    const FLOOR: usize = 64;
    let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let room = limit.saturating_sub(engine_handles_besides_tables(engine));
    let asked = (max_clients as u64).saturating_add(engine.max_open_tables as u64);
    if asked <= room {
        return (max_clients, engine.max_open_tables);
    }
    let clients = max_clients.min(to_usize(room / 2).max(FLOOR));
    let tables =
        (engine.max_open_tables).min(to_usize(room.saturating_sub(clients as u64)).max(FLOOR));
    (clients, tables)
}

/// Raises this process's soft open-file limit to its hard limit, as Redis does, and
/// returns the soft limit in force (`u64::MAX` where there is none to read).
#[cfg(unix)]
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct it is given, which lives here.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return u64::MAX;
    }
    // macOS refuses a soft limit above OPEN_MAX (10,240) even under an unlimited hard
    // one: that is tried next.
    const OPEN_MAX: libc::rlim_t = 10_240;
    for soft in [limit.rlim_max, limit.rlim_max.min(OPEN_MAX)] {
        if limit.rlim_cur >= soft {
            break;
        }
        let raised = libc::rlimit {
            rlim_cur: soft,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given, which lives here.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
            break;
        }
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        // `rlim_t` is u64 on Linux, i64 on FreeBSD; a limit is never negative.
        #[allow(clippy::unnecessary_cast)]
        let soft = limit.rlim_cur as u64;
        soft
    }
}

#[cfg(not(unix))]
fn raise_file_limit() -> u64 {
    u64::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default maxclients (10,000) and table cache (1,000) under the common limit of
    /// 1,024 open files left the database no file handle once enough idle clients were
    /// connected: a flush then failed with EMFILE. The limit is now shared out.
    #[test]
    fn clients_and_tables_share_the_file_limit_beside_the_databases_other_handles() {
        let engine = wisckey::Options::default();
        let other = engine_handles_besides_tables(&engine);
        let fits = |clients: usize, tables: usize, limit: u64| {
            clients as u64 + tables as u64 + other <= limit
        };
        // Room for everything asked: nothing changes.
        let plenty = 10_000 + 1_000 + other;
        assert_eq!(share_file_handles(plenty, 10_000, &engine), (10_000, 1_000));
        assert_eq!(
            share_file_handles(u64::MAX, 10_000, &engine),
            (10_000, 1_000)
        );
        // 1,024: clients get half of what is left, tables the rest.
        let (clients, tables) = share_file_handles(1024, 10_000, &engine);
        assert!(
            fits(clients, tables, 1024),
            "{clients} + {tables} + {other}"
        );
        assert_eq!(clients, ((1024 - other) / 2) as usize);
        assert!(tables >= clients, "{tables}");
        // Few clients asked for: they keep their number, the tables take what is left.
        let (clients, tables) = share_file_handles(1024, 100, &engine);
        assert_eq!(clients, 100);
        assert_eq!(tables as u64, 1024 - other - 100);
        // A limit below the database's other handles (macOS's soft 256) still leaves a
        // usable server: 64 of each, or what was asked if less.
        assert_eq!(share_file_handles(256, 10_000, &engine), (64, 64));
        assert_eq!(share_file_handles(256, 10, &engine), (10, 64));
    }

    /// The soft limit in force after raising it is at least what it was before.
    #[cfg(unix)]
    #[test]
    fn raising_the_file_limit_never_lowers_it() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the struct it is given.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) },
            0
        );
        let after = raise_file_limit();
        #[allow(clippy::unnecessary_cast)] // `rlim_t` is not u64 everywhere
        let before = if before.rlim_cur == libc::RLIM_INFINITY {
            u64::MAX
        } else {
            before.rlim_cur as u64
        };
        assert!(after >= before, "{after} < {before}");
    }

    /// The input buffer gives back what a large request left behind, keeping the unread
    /// bytes; a buffer that holds (or is receiving) a large request keeps its room.
    #[test]
    fn trim_input_gives_back_a_large_request_and_keeps_the_rest() {
        let mut input = Vec::with_capacity(64 << 20);
        input.extend_from_slice(b"*1");
        trim_input(&mut input);
        assert_eq!(input, b"*1", "the unread bytes are kept");
        assert!(
            input.capacity() <= 2 * READ_CHUNK,
            "capacity {} kept for 2 bytes",
            input.capacity()
        );

        let mut empty: Vec<u8> = Vec::with_capacity(64 << 20);
        trim_input(&mut empty);
        assert_eq!(empty.capacity(), 0);

        // Arriving: 3 MiB of a request in a buffer grown by doubling.
        let mut arriving = Vec::with_capacity(4 << 20);
        arriving.resize(3 << 20, b'x');
        let before = arriving.as_ptr();
        trim_input(&mut arriving);
        assert_eq!(arriving.capacity(), 4 << 20);
        assert_eq!(arriving.as_ptr(), before, "not reallocated");

        // The common case: a small buffer is not touched.
        let mut small = Vec::with_capacity(READ_CHUNK);
        small.extend_from_slice(b"PING\r\n");
        trim_input(&mut small);
        assert_eq!(small.capacity(), READ_CHUNK);
    }

    /// The reply buffer of a connection that goes back to waiting keeps a modest capacity,
    /// whatever it held (32 MiB of pipelined replies is under the old 64 MiB threshold).
    #[test]
    fn trim_replies_keeps_a_modest_buffer_while_waiting() {
        let mut out: Vec<u8> = Vec::with_capacity(32 << 20);
        trim_replies(&mut out);
        assert!(
            out.capacity() <= KEEP_REPLY_CAPACITY,
            "capacity {} kept while idle",
            out.capacity()
        );

        let mut small: Vec<u8> = Vec::with_capacity(2 * KEEP_REPLY_CAPACITY);
        let before = small.as_ptr();
        trim_replies(&mut small);
        assert_eq!(small.capacity(), 2 * KEEP_REPLY_CAPACITY);
        assert_eq!(small.as_ptr(), before, "not reallocated");
    }
}
