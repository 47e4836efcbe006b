#!/usr/bin/env python3
"""Fill a `wisckey serve` on a small file system (argv[1], a mount point) until it refuses
SETs, delete two thirds of the keys, measure how soon a SET is accepted again (30 s at most),
SET 400 more, SHUTDOWN, restart, and read back every acknowledged SET. Prints what it saw;
exits 1 if an acknowledged SET is missing or wrong, or no SET was accepted after the deletes."""
import socket, subprocess, sys, time, os, random

BIN = os.environ.get("WISCKEY_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/wisckey"))
MNT = sys.argv[1]
PORT = 6391

def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

class Conn:
    def __init__(self):
        for _ in range(200):
            try:
                self.s = socket.create_connection(("127.0.0.1", PORT)); break
            except OSError:
                time.sleep(0.05)
        self.f = self.s.makefile("rb")
    def cmd(self, *args):
        self.s.sendall(resp(*args)); return self.read()
    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+": return rest.decode()
        if t == b"-": return Exception(rest.decode())
        if t == b":": return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0: return None
            data = self.f.read(n + 2); return data[:-2]
        raise RuntimeError(line)

def serve(db):
    return subprocess.Popen([BIN, "serve", "--db", db, "--port", str(PORT), "--appendfsync", "always"],
                            stdout=subprocess.DEVNULL, stderr=open(db + ".stderr", "ab"))

def val(k, gen):
    return (b"%s-%d-" % (k, gen)) * (16384 // 12)

db = os.path.join(MNT, "db")
p = serve(db); c = Conn()
model = {}
errs = {}
rng = random.Random(7)
# fill
i = 0; refused = 0
while refused < 20:
    k = b"k%06d" % i; r = c.cmd("SET", k, val(k, 0)); i += 1
    if isinstance(r, Exception): refused += 1; errs[str(r)[:80]] = errs.get(str(r)[:80], 0) + 1
    else: model[k] = val(k, 0)
filled = len(model)
# delete a third
dels = 0; delfail = 0
for k in [k for n, k in enumerate(list(model)) if n % 3 != 0]:
    r = c.cmd("DEL", k)
    if isinstance(r, Exception): delfail += 1; errs[str(r)[:80]] = errs.get(str(r)[:80], 0) + 1
    else: del model[k]; dels += 1
t0 = time.time(); first_ok = None
while time.time() - t0 < 30:
    k = b"probe"; r = c.cmd("SET", k, val(k, 9))
    if not isinstance(r, Exception):
        model[k] = val(k, 9); first_ok = time.time() - t0; break
    time.sleep(0.1)
print(f"first SET accepted {first_ok} s after the deletes")
if os.environ.get("INFO"):
    info = c.cmd("INFO")
    print("\n".join(l for l in info.decode().splitlines() if any(w in l for w in ("amp", "gc", "dead", "live", "memtable", "flush", "space", "reserve", "segments", "error"))))
# more writes (space freed only after GC; some may be refused)
more = 0; morefail = 0
for j in range(400):
    k = b"m%06d" % j; r = c.cmd("SET", k, val(k, 1))
    if isinstance(r, Exception): morefail += 1; errs[str(r)[:80]] = errs.get(str(r)[:80], 0) + 1
    else: model[k] = val(k, 1); more += 1
    if j % 50 == 49: time.sleep(0.2)
r = None
try:
    c.s.sendall(resp("SHUTDOWN")); r = c.read()
except Exception as e:
    r = e
rc = p.wait(timeout=60)
p = serve(db); c = Conn()
missing = wrong = 0
for k, v in model.items():
    got = c.cmd("GET", k)
    if isinstance(got, Exception) or got is None: missing += 1
    elif got != v: wrong += 1
c.s.sendall(resp("SHUTDOWN"))
try: c.read()
except Exception: pass
rc2 = p.wait(timeout=60)
print(f"filled {filled} acknowledged before refusals; deleted {dels} (failed {delfail}); later sets ok {more} failed {morefail}; "
      f"shutdown reply {r!r} rc {rc}; reopen rc {rc2}; checked {len(model)}: missing {missing} wrong {wrong}; errors {errs}")
if missing or wrong or first_ok is None:
    sys.exit(1)
