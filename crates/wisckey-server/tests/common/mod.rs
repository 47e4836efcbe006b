//! Shared by the integration tests: an in-process server on a free loopback port over a
//! temporary database, and clients for it (the `redis` crate, and raw TCP).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use wisckey_server::{Config, Server, ShutdownHandle};

/// [`wisckey_server::Config::threads`] for tests that run both ways of serving: one event
/// loop that commits the writes itself, and four workers with an executor thread.
pub const BOTH_WAYS: [usize; 2] = [1, 4];

pub struct TestServer {
    pub addr: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), wisckey_server::Error>>>,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server with the defaults, changed by `tweak`, on 127.0.0.1 port 0.
    pub fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        TestServer::start_in(dir, tweak)
    }

    /// `WISCKEY_TEST_THREADS=<n>` serves every test that does not choose for itself with
    /// `n` threads (1: one event loop), for a whole-suite run of either way of serving.
    pub fn start_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> TestServer {
        let mut config = Config::new(dir.path());
        config.bind = SocketAddr::from(([127, 0, 0, 1], 0));
        config.engine.memtable_size = 1 << 20;
        if let Some(threads) = std::env::var("WISCKEY_TEST_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            config.threads = threads;
        }
        tweak(&mut config);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = wisckey_server::runtime(&config)?;
            runtime.block_on(async move {
                let server = match Server::bind(config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return Err(e);
                    }
                };
                let _ = tx.send(Ok((server.local_addr(), server.shutdown_handle())));
                server.run().await
            })
        });
        let (addr, handle) = rx
            .recv()
            .expect("server thread reports")
            .expect("server binds");
        TestServer {
            addr,
            handle,
            thread: Some(thread),
            dir,
        }
    }

    /// INFO's `serving_threads`: the runtime's workers, 1 for a single event loop.
    pub fn serving_threads(&self) -> usize {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.client())
            .expect("INFO server");
        let field = |name: &str| -> usize {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("INFO lacks {name}: {info}"))
        };
        let threads = field("serving_threads:");
        assert_eq!(
            field("commits_on_event_loop:"),
            usize::from(threads == 1),
            "one thread means the loop commits the writes: {info}"
        );
        threads
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect")
    }

    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Raw(s)
    }

    /// Shuts the server down and returns the database directory.
    pub fn stop(mut self) -> tempfile::TempDir {
        self.shutdown_and_join();
        let dir = tempfile::tempdir().expect("placeholder");
        std::mem::replace(&mut self.dir, dir)
    }

    /// Shuts the server down and returns how it ended (for a test that broke its database).
    pub fn stop_with_result(mut self) -> Result<(), wisckey_server::Error> {
        self.handle.shutdown();
        match self.thread.take() {
            Some(t) => t.join().expect("server thread"),
            None => Ok(()),
        }
    }

    fn shutdown_and_join(&mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            t.join()
                .expect("server thread")
                .expect("server shut down cleanly");
        }
    }

    /// Waits for the server to end by itself (SHUTDOWN).
    pub fn wait(mut self) -> tempfile::TempDir {
        if let Some(t) = self.thread.take() {
            t.join()
                .expect("server thread")
                .expect("server shut down cleanly");
        }
        let dir = tempfile::tempdir().expect("placeholder");
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if self.thread.is_some() && !std::thread::panicking() {
            self.shutdown_and_join();
        } else {
            self.handle.shutdown();
        }
    }
}

/// A raw TCP connection: send bytes, read exact replies.
pub struct Raw(pub TcpStream);

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).expect("send");
    }

    /// Reads exactly `expected.len()` bytes and compares them.
    pub fn expect(&mut self, expected: &[u8]) {
        let mut got = vec![0u8; expected.len()];
        self.0.read_exact(&mut got).expect("read reply");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
    }

    /// Reads through the next CRLF (the rest of a reply whose start was checked with
    /// [`Raw::expect`]); returns it.
    // Each test crate compiles this module; not all of them read a line.
    #[allow(dead_code)]
    pub fn read_line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            self.0.read_exact(&mut byte).expect("read a line");
            line.push(byte[0]);
        }
        line
    }

    /// Reads until the server closes the connection; returns what came. Panics if the
    /// connection is still open when the read times out: a test that expects a close must
    /// not pass on the bytes that came before the timeout. A reset counts as a close (a
    /// server that closes with our request bytes unread makes the kernel send one).
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        match self.0.read_to_end(&mut all) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!(
                "the server did not close the connection ({e}); it had sent {:?}",
                String::from_utf8_lossy(&all)
            ),
        }
        all
    }
}

/// One multibulk request.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
