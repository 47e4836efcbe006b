#!/usr/bin/env python3
"""An independent reader of wisckey's on-disk format, written from docs/FORMAT.md alone.

Usage: python3 tools/format_reader.py [--allow-torn-tail] DBDIR

Decodes every file of a (closed) database directory -- CURRENT, every manifest (every
edit, every field), every table (footer, index, data blocks, filter, trailers) and every
value-log segment (header, every record, batches, punched ranges stepped over) -- and
cross-checks what FORMAT.md says must hold between them. Prints a summary of what it
decoded and exits 0, or exits 1 with one precise message: file, offset, the FORMAT.md
section, what was expected and what was found.

It reads a database at rest after a clean close, so by default a torn tail at the end of
the log (legal after a crash, FORMAT.md "End of the log") is an error, since "a clean close
cuts the active one"; --allow-torn-tail accepts one in the newest segment.

Python 3 standard library only. Every function names the FORMAT.md section it follows.
"""

import os
import struct
import sys

# --- Preamble (top of FORMAT.md): integers, varints, checksums -----------------------------

MAX_FILE_NUMBER = 1 << 48  # "Directory layout": filename::MAX_FILE_NUMBER
MAX_SEQUENCE = (1 << 56) - 1  # "Internal keys": sequence is 56 bits
NUM_LEVELS = 7  # "VersionEdit payload": level varint32 (< 7)
# "Value log" / "Record": VlogOptions::max_key_size and max_value_size.
MAX_KEY_SIZE = 64 * 1024
MAX_VALUE_SIZE = 256 * 1024 * 1024


class FormatError(Exception):
    """A violation of FORMAT.md: where, which section, what was expected, what was found."""

    def __init__(self, path, offset, section, expected, found):
        where = path if offset is None else f"{path} at offset {offset}"
        super().__init__(
            f"{where}: FORMAT.md \u00ab{section}\u00bb: expected {expected}, found {found}"
        )
        self.path = path


def _crc32c_table():
    # CRC32C (Castagnoli), reflected polynomial 0x82F63B78.
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    """Plain CRC32C of `data` (continuing `crc`, a finished CRC)."""
    table = _CRC_TABLE
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def mask(c):
    """Preamble: mask(c) = rotate_right(c, 15) + 0xa282ead8 (mod 2^32)."""
    rot = ((c >> 15) | (c << 17)) & 0xFFFFFFFF
    return (rot + 0xA282EAD8) & 0xFFFFFFFF


def u32(buf, off):
    return struct.unpack_from("<I", buf, off)[0]


def u64(buf, off):
    return struct.unpack_from("<Q", buf, off)[0]


class Cursor:
    """Reads LEB128 varints and byte strings from buf[pos:end], failing with FormatError."""

    def __init__(self, buf, pos, end, path, section, base=0):
        self.buf, self.pos, self.end = buf, pos, end
        self.path, self.section, self.base = path, section, base

    def fail(self, expected, found, at=None):
        raise FormatError(
            self.path, self.base + (self.pos if at is None else at), self.section, expected, found
        )

    def done(self):
        return self.pos >= self.end

    def varint(self, bits):
        """LEB128 of at most `bits` bits (varint32: 5 bytes, varint64: 10 bytes)."""
        start, result, shift = self.pos, 0, 0
        max_bytes = (bits + 6) // 7
        for _ in range(max_bytes):
            if self.pos >= self.end:
                self.fail(f"a complete varint{bits}", "the end of the region", start)
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if result >> bits:
                    self.fail(f"a varint{bits} below 2^{bits}", result, start)
                return result
        self.fail(f"a varint{bits} of at most {max_bytes} bytes", "a longer one", start)

    def bytes(self, n, what):
        if n > self.end - self.pos:
            self.fail(f"{what} of {n} bytes inside the region", f"{self.end - self.pos} bytes left")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def lp(self, what):
        """lp(bytes) = varint length followed by the bytes ("Manifest and CURRENT")."""
        return self.bytes(self.varint(32), what)


# --- "Internal keys and LSM values" --------------------------------------------------------

KIND_DELETION, KIND_VALUE, KIND_POINTER = 0, 1, 2


def split_internal_key(ikey, path, offset, section):
    """user_key ++ u64 LE trailer, trailer = (sequence << 8) | kind, kind in 0..=2."""
    if len(ikey) < 8:
        raise FormatError(path, offset, section, "an internal key of at least 8 bytes",
                          f"{len(ikey)} bytes")
    trailer = u64(ikey, len(ikey) - 8)
    kind = trailer & 0xFF
    if kind not in (KIND_DELETION, KIND_VALUE, KIND_POINTER):
        raise FormatError(path, offset, section, "a trailer kind of 0, 1 or 2", kind)
    user_key = ikey[:-8]
    if len(user_key) > MAX_KEY_SIZE:
        raise FormatError(path, offset, section, f"a user key of at most {MAX_KEY_SIZE} bytes",
                          len(user_key))
    return user_key, trailer >> 8, kind


def ikey_order(ikey):
    """Order: user key ascending (bytewise), then trailer descending (newest first)."""
    return (ikey[:-8], -u64(ikey, len(ikey) - 8))


def decode_value_pointer(value, path, offset):
    """"ValuePointer": varint64 segment, varint64 offset, varint32 len, filling the value."""
    c = Cursor(value, 0, len(value), path, "ValuePointer", base=offset)
    ptr = (c.varint(64), c.varint(64), c.varint(32))
    if not c.done():
        c.fail("the three varints to fill the LSM value exactly", f"{len(value) - c.pos} trailing bytes")
    return ptr


# --- "Directory layout" ---------------------------------------------------------------------


def parse_number(text):
    """NNNNNN: decimal, zero-padded to at least 6 digits, exactly as {:06} spells it, <= 2^48."""
    if not text.isdigit() or not text.isascii():
        return None
    n = int(text)
    if n > MAX_FILE_NUMBER or f"{n:06}" != text:
        return None
    return n


def classify_directory(db):
    """Sorts the names of the directory into the file types of "Directory layout"."""
    files = {"tables": {}, "segments": {}, "manifests": {}, "tmp": {}, "other": []}
    for name in sorted(os.listdir(db)):
        path = os.path.join(db, name)
        if name in ("CURRENT", "LOCK", "RESERVE", "CHECKPOINT-INCOMPLETE"):
            files["other"].append(name)
            if name in ("LOCK", "CHECKPOINT-INCOMPLETE") and os.path.getsize(path) != 0:
                raise FormatError(path, None, "Directory layout / LOCK file", "an empty file",
                                  f"{os.path.getsize(path)} bytes")
            if name == "RESERVE" and os.path.getsize(path) != 0:
                raise FormatError(path, None, "Directory layout", "RESERVE of length 0",
                                  f"{os.path.getsize(path)} bytes")
            continue
        if name == "lost" and os.path.isdir(path):
            continue  # never read by the engine
        number = None
        for prefix, suffix, kind in (("MANIFEST-", "", "manifests"), ("", ".sst", "tables"),
                                     ("", ".vlog", "segments"), ("", ".tmp", "tmp")):
            if name.startswith(prefix) and name.endswith(suffix):
                stem = name[len(prefix) : len(name) - len(suffix)]
                number = parse_number(stem)
                if number is not None:
                    files[kind][number] = path
                    break
        if number is None:
            raise FormatError(path, None, "Directory layout",
                              "a name wisckey writes (NNNNNN spelled as {:06}, at most 2^48)",
                              repr(name))
    # Tables, manifests and temporary files share one counter: no number twice.
    seen = {}
    for kind in ("tables", "manifests", "tmp"):
        for n, path in files[kind].items():
            if n in seen:
                raise FormatError(path, None, "Directory layout",
                                  "tables, manifests and temporary files to share one counter",
                                  f"number {n} also used by {seen[n]}")
            seen[n] = path
    return files


# --- "Manifest and CURRENT" / "CURRENT" -------------------------------------------------------


def read_current(db, manifests):
    """Exactly `MANIFEST-<digits>\\n`, at most 256 bytes, naming a manifest that exists."""
    path = os.path.join(db, "CURRENT")
    if not os.path.exists(path):
        raise FormatError(path, None, "CURRENT", "a CURRENT file", "none (NotADatabase)")
    data = open(path, "rb").read()
    if len(data) > 256 or not data.endswith(b"\n") or data.count(b"\n") != 1:
        raise FormatError(path, 0, "CURRENT", "one line `MANIFEST-<digits>\\n` of at most 256 bytes",
                          repr(data[:80]))
    name = data[:-1].decode("utf-8", "replace")
    number = parse_number(name[len("MANIFEST-"):]) if name.startswith("MANIFEST-") else None
    if number is None:
        raise FormatError(path, 0, "CURRENT", "MANIFEST-NNNNNN", repr(name))
    if number not in manifests:
        raise FormatError(path, 0, "CURRENT", f"the named {name} to exist", "no such file")
    return number


# --- "Manifest header", "Record", "VersionEdit payload" --------------------------------------

MANIFEST_MAGIC = b"WKMANFST"
MANIFEST_VERSION = 4
# "Manifest header": format 2 added tags 9, 10; format 3 added 11, 12; format 4 added 13.
TAG_SINCE = {9: 2, 10: 2, 11: 3, 12: 3, 13: 4}
ONCE_TAGS = (1, 2, 6, 7, 8)


def read_manifest_records(path):
    """"Manifest header" then "Record"s; returns (format_version, [(offset, payload)], torn)."""
    data = open(path, "rb").read()
    sec = "Manifest header"
    if len(data) < 12 or data[:8] != MANIFEST_MAGIC:
        raise FormatError(path, 0, sec, "magic WKMANFST", repr(data[:8]))
    version = u32(data, 8)
    if version == 0 or version > MANIFEST_VERSION:
        raise FormatError(path, 8, sec, f"format_version 1..={MANIFEST_VERSION}", version)
    records, pos, torn = [], 12, None
    while pos < len(data):
        if len(data) - pos < 8:
            torn = (pos, "a record header cut short")
            break
        crc, length = u32(data, pos), u32(data, pos + 4)
        if length == 0 or length > len(data) - pos - 8:
            torn = (pos, f"length {length} with {len(data) - pos - 8} bytes left")
            break
        payload = data[pos + 8 : pos + 8 + length]
        if mask(crc32c(payload)) != crc:
            torn = (pos, "a checksum mismatch")
            break
        records.append((pos + 8, payload))
        pos += 8 + length
    if torn is not None:
        # "Record": a bad record is a torn append unless a complete, non-empty record with a
        # valid checksum starts at any later offset (then it had been synced: Corruption).
        for later in range(torn[0] + 1, len(data) - 8):
            length = u32(data, later + 4)
            if 0 < length <= len(data) - later - 8:
                if mask(crc32c(data[later + 8 : later + 8 + length])) == u32(data, later):
                    raise FormatError(path, torn[0], "Record (manifest)",
                                      "only the last record to be torn",
                                      f"{torn[1]}, but a valid record starts at {later}")
    return version, records, torn


def decode_edit(payload, path, offset, version):
    """"VersionEdit payload": a sequence of (tag varint32, body); returns a list of fields."""
    sec = "VersionEdit payload"
    c = Cursor(payload, 0, len(payload), path, sec, base=offset)
    fields, seen = [], set()

    def number():
        at = c.pos
        n = c.varint(64)
        if n > MAX_FILE_NUMBER:
            c.fail("a file/segment number of at most 2^48", n, at)
        return n

    def level():
        at = c.pos
        lv = c.varint(32)
        if lv >= NUM_LEVELS:
            c.fail("a level < 7", lv, at)
        return lv

    def ikey(what):
        at = c.pos
        k = c.lp(what)
        split_internal_key(k, path, offset + at, sec)
        return k

    while not c.done():
        at = c.pos
        tag = c.varint(32)
        if tag in ONCE_TAGS:
            if tag in seen:
                c.fail(f"tag {tag} at most once per edit", "it twice", at)
            seen.add(tag)
        if tag in TAG_SINCE and version < TAG_SINCE[tag]:
            c.fail(f"tag {tag} only in a format >= {TAG_SINCE[tag]} manifest",
                   f"it in format {version}", at)
        if tag == 1:
            f = ("next_file_number", number())
        elif tag == 2:
            seq = c.varint(64)
            if seq > MAX_SEQUENCE:
                c.fail("last_sequence <= 2^56 - 1", seq, at)
            f = ("last_sequence", seq)
        elif tag == 3:
            f = ("compact_pointer", level(), ikey("compact pointer key"))
        elif tag == 4:
            f = ("deleted_file", level(), number())
        elif tag == 5:
            lv, n, size = level(), number(), c.varint(64)
            f = ("new_file", lv, n, size, ikey("smallest"), ikey("largest"))
        elif tag in (6, 7):
            f = ("vlog_head" if tag == 6 else "vlog_tail", number(), c.varint(64))
        elif tag == 8:
            f = ("next_vlog_segment", number())
        elif tag == 9:
            f = ("vlog_segment_added", number())
        elif tag == 10:
            f = ("vlog_segment_removed", number())
        elif tag == 11:
            f = ("vlog_segment_sealed", number(), c.varint(64))
        elif tag == 12:
            f = ("vlog_dead_bytes", number(), c.varint(64))
        elif tag == 13:
            f = ("vlog_punched", number(), c.varint(64), c.varint(64))
        elif 1024 <= tag <= 65535:
            f = ("extra", tag, c.lp("extra bytes"))
        else:
            c.fail("a known tag (1..=13, 1024..=65535)", tag, at)
        fields.append((at,) + f)
    return fields


class ManifestState:
    """The state a manifest's edits build ("VersionEdit payload": how edits apply)."""

    def __init__(self):
        self.levels = [dict() for _ in range(NUM_LEVELS)]  # number -> (size, smallest, largest)
        self.next_file_number = None
        self.last_sequence = 0
        self.head = None
        self.tail = None
        self.next_vlog_segment = 0
        self.segments = {}  # number -> {"sealed": size|None, "dead": n, "punched": [(a, b)]}
        self.removed = set()
        self.extra = {}
        self.edits = 0


def apply_edit(state, fields, path, offset):
    """Applies one edit: file deletions before additions; segment fields in the order added,
    sealed, dead bytes, punched, removed; counters take the max, positions the last value."""
    sec = "VersionEdit payload"
    by = {}
    for f in fields:
        by.setdefault(f[1], []).append(f)
    for at, _, n in by.get("next_file_number", []):
        state.next_file_number = max(state.next_file_number or 0, n)
    for at, _, seq in by.get("last_sequence", []):
        state.last_sequence = max(state.last_sequence, seq)
    for at, _, n in by.get("next_vlog_segment", []):
        state.next_vlog_segment = max(state.next_vlog_segment, n)
    for at, _, seg, off in by.get("vlog_head", []):
        state.head = (seg, off)
    for at, _, seg, off in by.get("vlog_tail", []):
        state.tail = (seg, off)
    for at, _, lv, n in by.get("deleted_file", []):
        if n not in state.levels[lv]:
            raise FormatError(path, offset + at, sec,
                              f"deleted_file({lv}, {n}) to name a table at that level",
                              "no such table")
        del state.levels[lv][n]
    for at, _, lv, n, size, smallest, largest in by.get("new_file", []):
        if any(n in level for level in state.levels):
            raise FormatError(path, offset + at, sec, f"new_file {n} not to be listed already",
                              "it listed")
        state.levels[lv][n] = (size, smallest, largest)
    for at, _, seg in by.get("vlog_segment_added", []):
        if seg in state.removed:
            raise FormatError(path, offset + at, sec, "a segment number never reused (tag 8)",
                              f"segment {seg} added after it was removed")
        state.segments.setdefault(seg, {"sealed": None, "dead": 0, "punched": []})
    for at, _, seg, size in by.get("vlog_segment_sealed", []):
        if seg not in state.segments:
            raise FormatError(path, offset + at, sec, f"vlog_segment_sealed for a listed segment",
                              f"segment {seg} not listed")
        state.segments[seg]["sealed"] = size
    for at, _, seg, n in by.get("vlog_dead_bytes", []):
        if seg in state.segments:  # ignored for a segment that is not listed
            state.segments[seg]["dead"] += n
    for at, _, seg, off, length in by.get("vlog_punched", []):
        if seg not in state.segments:
            continue  # ignored for a segment that is not listed
        sealed = state.segments[seg]["sealed"]
        if sealed is None or length == 0 or off < 32 or off + length > sealed:
            raise FormatError(path, offset + at, sec,
                              "a punched range within [32, sealed size) with len > 0",
                              f"[{off}, {off + length}) in segment {seg} sealed at {sealed}")
        ranges = state.segments[seg]["punched"] + [(off, off + length)]
        state.segments[seg]["punched"] = merge_ranges(ranges)
    for at, _, seg in by.get("vlog_segment_removed", []):
        state.segments.pop(seg, None)
        state.removed.add(seg)
    for at, _, tag, value in by.get("extra", []):
        state.extra[tag] = value
    if state.version >= 2 and state.head is not None and state.head[0] not in state.segments:
        raise FormatError(path, offset, sec + " (Segments)",
                          f"the head's segment {state.head[0]} listed "
                          "(a flush adds every segment up to it)",
                          f"listed: {sorted(state.segments)}")
    state.edits += 1


def merge_ranges(ranges):
    """Tag 13: overlapping or touching ranges merge."""
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def check_snapshot_edit(fields, path, offset, version):
    """"Record (manifest)": the first record is a snapshot edit of the whole state: the
    counters, the head (format >= 2: "a new database's first manifest lists segment 1 and a
    head"), every listed segment's tag 9, and one tag 13 per merged punched range."""
    tags = {f[1] for f in fields}
    need = {"next_file_number", "last_sequence"}
    if version >= 2:
        need |= {"vlog_head", "next_vlog_segment", "vlog_segment_added"}
    if need - tags:
        raise FormatError(path, offset, "Record (manifest)",
                          f"a first (snapshot) edit holding {sorted(need)}",
                          f"one without {sorted(need - tags)}")
    listed = {f[2] for f in fields if f[1] == "vlog_segment_added"}
    ranges = {}
    for f in fields:
        if f[1] in ("vlog_segment_sealed", "vlog_dead_bytes", "vlog_punched") and f[2] not in listed:
            raise FormatError(path, offset + f[0], "VersionEdit payload (snapshot edit)",
                              "segment fields only for segments the snapshot lists", f"segment {f[2]}")
        if f[1] == "vlog_punched":
            ranges.setdefault(f[2], []).append((f[3], f[3] + f[4]))
    for seg, rs in ranges.items():
        if len(merge_ranges(rs)) != len(rs):
            raise FormatError(path, offset, "VersionEdit payload (snapshot edit)",
                              "one tag 13 per merged punched range", f"{sorted(rs)} in segment {seg}")


def read_manifest(path):
    """Decodes one manifest whole: header, every record, every edit, the state they build."""
    version, records, torn = read_manifest_records(path)
    state = ManifestState()
    state.version, state.torn = version, torn
    for i, (offset, payload) in enumerate(records):
        fields = decode_edit(payload, path, offset, version)
        if i == 0:
            check_snapshot_edit(fields, path, offset, version)
        apply_edit(state, fields, path, offset)
    if not records:
        raise FormatError(path, 12, "Record (manifest)", "a first record holding a snapshot edit",
                          "no record")
    if state.next_file_number is None:
        raise FormatError(path, None, "Record (manifest)", "next_file_number (tag 1) recorded",
                          "a manifest that never records it")
    return state


# --- "SSTable file format" -------------------------------------------------------------------

TABLE_MAGIC = 0x5749_5343_4B53_5354
FOOTER_SIZE = 56
TRAILER_SIZE = 5


def read_block(data, path, offset, size, what):
    """"Block trailer": contents, then type 0 and mask(crc32c(contents ++ type))."""
    sec = "Block trailer"
    if offset + size + TRAILER_SIZE > len(data) - FOOTER_SIZE:
        raise FormatError(path, offset, sec, f"the {what} block and trailer before the footer",
                          f"[{offset}, {offset + size + TRAILER_SIZE}) past {len(data) - FOOTER_SIZE}")
    contents = data[offset : offset + size]
    block_type = data[offset + size]
    if block_type != 0:
        raise FormatError(path, offset + size, sec, "type 0 (uncompressed)", block_type)
    crc = u32(data, offset + size + 1)
    if mask(crc32c(data[offset : offset + size + 1])) != crc:
        raise FormatError(path, offset + size + 1, sec, f"the {what} block's checksum",
                          "a mismatch")
    return contents


def decode_block(contents, path, base, every_entry_restart):
    """"Data and index blocks": entries, restart[0..n], n; returns [(key, value, offset)]."""
    sec = "Data and index blocks"
    size = len(contents)
    if size < 8:
        raise FormatError(path, base, sec, "a block of at least 8 bytes", size)
    n = u32(contents, size - 4)
    if n < 1 or 4 + 4 * n > size:
        raise FormatError(path, base + size - 4, sec, "n >= 1 restarts with 4 + 4n <= block size",
                          f"n = {n} in {size} bytes")
    entries_end = size - 4 - 4 * n
    restarts = [u32(contents, entries_end + 4 * i) for i in range(n)]
    if restarts[0] != 0:
        raise FormatError(path, base + entries_end, sec, "restart[0] = 0", restarts[0])
    for i in range(1, n):
        if not restarts[i - 1] < restarts[i] < entries_end:
            raise FormatError(path, base + entries_end + 4 * i, sec,
                              "restarts strictly increasing and inside the entries", restarts[i])
    c = Cursor(contents, 0, entries_end, path, sec, base=base)
    out, prev, restart_set = [], b"", set(restarts)
    while not c.done():
        at = c.pos
        shared, non_shared, value_len = c.varint(32), c.varint(32), c.varint(32)
        if at in restart_set and shared != 0:
            c.fail("shared = 0 at a restart point", shared, at)
        if every_entry_restart and at not in restart_set:
            c.fail("every index entry to be a restart point (restart_interval 1)",
                   "an entry that is not", at)
        if shared > len(prev):
            c.fail(f"shared <= the previous key's length {len(prev)}", shared, at)
        key = prev[:shared] + c.bytes(non_shared, "key_delta")
        value = c.bytes(value_len, "value")
        out.append((key, value, base + at))
        prev = key
    index_of = {o - base: i for i, (_, _, o) in enumerate(out)}
    for i, r in enumerate(restarts):
        if r not in index_of and not (r == 0 and not out):
            raise FormatError(path, base + entries_end + 4 * i, sec,
                              "each restart to be the offset of an entry", r)
    # Restart points: the first entry and then every restart_interval-th entry.
    if out:
        interval = index_of[restarts[1]] if n > 1 else len(out)
        want = list(range(0, len(out), interval))
        if [index_of[r] for r in restarts] != want:
            raise FormatError(path, base + entries_end, sec,
                              f"restarts at every {interval}-th entry ({want[:8]}...)",
                              f"entries {[index_of[r] for r in restarts][:8]}...")
    return out


def read_footer(data, path):
    """"Footer (56 bytes, at file_size - 56)", in the reader order the section gives."""
    sec = "Footer"
    if len(data) < FOOTER_SIZE:
        raise FormatError(path, 0, sec, "a file of at least 56 bytes", len(data))
    f = len(data) - FOOTER_SIZE
    if u64(data, f + 48) != TABLE_MAGIC:
        raise FormatError(path, f + 48, sec, f"magic {TABLE_MAGIC:#x}", hex(u64(data, f + 48)))
    version = u32(data, f + 40)
    if version > 1:
        raise FormatError(path, f + 40, sec, "version 1 (UnsupportedVersion)", version)
    if mask(crc32c(data[f : f + 44])) != u32(data, f + 44):
        raise FormatError(path, f + 44, sec, "the footer checksum", "a mismatch")
    if version == 0:
        raise FormatError(path, f + 40, sec, "version 1", 0)
    filt = (u64(data, f), u64(data, f + 8))
    index = (u64(data, f + 16), u64(data, f + 24))
    for what, (off, size) in (("filter", filt), ("index", index)):
        if (what == "index" or size) and off + size + TRAILER_SIZE > f:
            raise FormatError(path, f, sec, f"the {what} handle to end at or before the footer",
                              f"[{off}, {off + size + TRAILER_SIZE})")
    return filt, index, u64(data, f + 32)


M64 = (1 << 64) - 1
BLOOM_K1, BLOOM_K2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F


def rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def bloom_hash(key):
    """"Filter block": filter::bloom_hash, u64 wrapping arithmetic, as FORMAT.md spells it."""
    h = (len(key) * BLOOM_K1 & M64) ^ 0x2545F4914F6CDD1D
    whole = len(key) - len(key) % 8
    for i in range(0, whole, 8):
        w = rotl64(u64(key, i) * BLOOM_K2 & M64, 31)
        h = rotl64(h ^ (w * BLOOM_K1 & M64), 27) * BLOOM_K1 & M64
    t = int.from_bytes(key[whole:].ljust(8, b"\0"), "little")
    w = rotl64(t * BLOOM_K2 & M64, 31)
    h ^= w * BLOOM_K1 & M64
    h ^= h >> 33
    h = h * 0xFF51AFD7ED558CCD & M64
    h ^= h >> 33
    h = h * 0xC4CEB9FE1A85EC53 & M64
    return h ^ (h >> 33)


def round_half_away(x):
    """"Filter block": round halves away from zero (x >= 0 here)."""
    return int(x + 0.5)


def check_filter(contents, user_keys, path, offset):
    """"Filter block": m bit bytes then k; every user key of the table must test positive."""
    sec = "Filter block"
    if len(contents) < 2:
        raise FormatError(path, offset, sec, "m >= 8 bit bytes and k", f"{len(contents)} bytes")
    m, k = len(contents) - 1, contents[-1]
    if not 1 <= k <= 30:
        raise FormatError(path, offset + m, sec, "k in 1..=30", k)
    # m = ceil(max(64, keys * bits_per_key) / 8), k = round(0.69 * bits_per_key) in 1..=30:
    # some bits_per_key (the option; 1..=100) must give both.
    n = len(user_keys)
    fits = [b for b in range(1, 101)
            if (max(64, n * b) + 7) // 8 == m and min(30, max(1, round_half_away(0.69 * b))) == k]
    if not fits:
        raise FormatError(path, offset, sec,
                          f"m = ceil(max(64, {n} keys * bits_per_key) / 8) "
                          "and k = round(0.69 * bits_per_key)",
                          f"m = {m}, k = {k}")
    bits = 8 * m
    for key in user_keys:
        h = bloom_hash(key)
        h1, h2 = h & 0xFFFFFFFF, h >> 32
        for i in range(k):
            p = (h1 + i * h2) % (1 << 64) % bits
            if not contents[p // 8] >> (p % 8) & 1:
                raise FormatError(path, offset, sec, f"every user key's {k} probe bits set",
                                  f"bit {p} clear for key {key!r}")


def read_table(path):
    """"SSTable file format": footer, index block, every data block, the filter block; checks
    that the regions tile the file, keys are ordered, and the index and counts agree."""
    data = open(path, "rb").read()
    (f_off, f_size), (i_off, i_size), num_entries = read_footer(data, path)
    footer_at = len(data) - FOOTER_SIZE
    index = decode_block(read_block(data, path, i_off, i_size, "index"), path, i_off, True)
    entries, pos = [], 0
    for ikey, handle_bytes, at in index:
        split_internal_key(ikey, path, at, "Data and index blocks (index entry)")
        c = Cursor(handle_bytes, 0, len(handle_bytes), path,
                   "Data and index blocks (index value)", base=at)
        b_off, b_size = c.varint(64), c.varint(64)
        if not c.done():
            c.fail("the handle to fill the index value exactly", "trailing bytes")
        # "File layout": no gaps or padding; data blocks come first, in order.
        if b_off != pos:
            raise FormatError(path, at, "File layout", f"the next data block at {pos} (no gaps)", b_off)
        block = decode_block(read_block(data, path, b_off, b_size, "data"), path, b_off, False)
        if block and block[-1][0] != ikey:
            raise FormatError(path, at, "Data and index blocks",
                              "the index key = the last internal key of its data block",
                              f"{ikey!r} for last key {block[-1][0]!r}")
        if not block:
            raise FormatError(path, b_off, "File layout", "a data block with entries", "an empty one")
        entries.extend(block)
        pos = b_off + b_size + TRAILER_SIZE
    # Filter (if any) then index then footer, back to back.
    if f_size:
        if f_off != pos:
            raise FormatError(path, footer_at, "File layout", f"the filter block at {pos}", f_off)
        pos = f_off + f_size + TRAILER_SIZE
    if i_off != pos or i_off + i_size + TRAILER_SIZE != footer_at:
        raise FormatError(path, footer_at, "File layout",
                          f"the index block at {pos} ending at the footer ({footer_at})",
                          f"[{i_off}, {i_off + i_size + TRAILER_SIZE})")
    if len(entries) != num_entries:
        raise FormatError(path, footer_at + 32, "Footer", f"num_entries = {len(entries)} entries read",
                          num_entries)
    decoded, prev = [], None
    for ikey, value, at in entries:
        user_key, seq, kind = split_internal_key(ikey, path, at, "Internal keys and LSM values")
        if prev is not None and not ikey_order(prev) < ikey_order(ikey):
            raise FormatError(path, at, "Internal keys and LSM values",
                              "keys strictly ascending (user key asc, trailer desc)",
                              f"{ikey!r} after {prev!r}")
        prev = ikey
        if kind == KIND_DELETION and value:
            raise FormatError(path, at, "Internal keys and LSM values", "an empty Deletion value",
                              f"{len(value)} bytes")
        if kind == KIND_POINTER:
            value = decode_value_pointer(value, path, at)
        decoded.append((user_key, seq, kind, value, at))
    user_keys = []
    for user_key, *_ in decoded:
        if not user_keys or user_keys[-1] != user_key:
            user_keys.append(user_key)
    if f_size:
        check_filter(read_block(data, path, f_off, f_size, "filter"), user_keys, path, f_off)
    return {"entries": decoded, "size": len(data), "blocks": len(index), "filter": bool(f_size),
            "smallest": entries[0][0] if entries else None,
            "largest": entries[-1][0] if entries else None}


# --- "Value-log format" ------------------------------------------------------------------------

VLOG_MAGIC = 0x0100474F4C564B57
VLOG_VERSION = 2
HEADER_SIZE = 32
RECORD_HEADER = 22
LAST_IN_BATCH, SYNCED_BEFORE = 1, 2


def read_segment_header(data, path, number):
    """"Segment header (32 bytes, at offset 0)"."""
    sec = "Segment header"
    if len(data) < HEADER_SIZE:
        raise FormatError(path, 0, sec, "a 32-byte header", f"{len(data)} bytes")
    if u64(data, 0) != VLOG_MAGIC:
        raise FormatError(path, 0, sec, f"magic {VLOG_MAGIC:#x}", hex(u64(data, 0)))
    version = u32(data, 8)
    if version > VLOG_VERSION:
        raise FormatError(path, 8, sec, f"format_version <= {VLOG_VERSION} (UnsupportedVersion)", version)
    if mask(crc32c(data[:28])) != u32(data, 28):
        raise FormatError(path, 28, sec, "header_crc over bytes 0..28", "a mismatch")
    if version == 0:
        raise FormatError(path, 8, sec, "format_version 1 or 2", 0)
    if u64(data, 12) != number:
        raise FormatError(path, 12, sec, f"segment = {number} (the file name's number)", u64(data, 12))
    return version, u64(data, 20)


def decode_record(data, pos, end, version):
    """"Record (22-byte fixed header + key + value)": a dict, or a string saying why the bytes
    at `pos` are not a valid record."""
    if end - pos < RECORD_HEADER:
        return f"{end - pos} bytes, less than a 22-byte record header"
    crc, key_len, value_len = struct.unpack_from("<III", data, pos)
    seq = u64(data, pos + 12)
    kind, flags = data[pos + 20], data[pos + 21]
    if key_len > MAX_KEY_SIZE or value_len > MAX_VALUE_SIZE:
        return f"key_len {key_len} / value_len {value_len} above the maxima"
    length = RECORD_HEADER + key_len + value_len
    if length > end - pos:
        return f"a record of {length} bytes running past the data end {end}"
    if mask(crc32c(data[pos + 4 : pos + length])) != crc:
        return "a checksum mismatch"
    if seq > MAX_SEQUENCE:
        return f"sequence {seq} above 2^56 - 1"
    if kind not in (KIND_DELETION, KIND_VALUE):
        return f"kind {kind} (only 0 or 1)"
    known = LAST_IN_BATCH | (SYNCED_BEFORE if version >= 2 else 0)
    if flags & ~known:
        return f"unknown flags {flags:#x}"
    if kind == KIND_DELETION and value_len:
        return f"a deletion with a {value_len}-byte value"
    key = bytes(data[pos + RECORD_HEADER : pos + RECORD_HEADER + key_len])
    return {"offset": pos, "len": length, "seq": seq, "kind": kind, "flags": flags, "key": key,
            "value_at": pos + RECORD_HEADER + key_len,
            "value_len": value_len}


def scan_segment(data, path, version, data_end, punched):
    """"Record", "Write batches", "Punched ranges": reads records back to back from 32 up to
    `data_end`, stepping over punched ranges; returns (records, batches, end, why_stopped)."""
    records, batches, batch, pos = [], 0, [], HEADER_SIZE
    punched_starts = {a: b for a, b in punched}
    cut_by_punch = False
    stop = None
    while pos < data_end:
        if pos in punched_starts:  # steps from a range's start to its end without reading
            pos = punched_starts[pos]
            cut_by_punch = True
            continue
        rec = decode_record(data, pos, data_end, version)
        if isinstance(rec, str):
            stop = rec
            break
        for a, b in punched:
            if pos < a < pos + rec["len"] or a < pos < b:
                raise FormatError(path, pos, "Punched ranges",
                                  "no record overlapping a punched range it did not start at",
                                  f"a {rec['len']}-byte record over [{a}, {b})")
        # Consecutive sequences within a batch; a punched range may have cut records out.
        expected = batch[-1]["seq"] + 1 if batch else None
        if batch and rec["seq"] != expected and not (cut_by_punch and rec["seq"] > expected):
            raise FormatError(path, pos, "Write batches",
                              f"sequence {batch[-1]['seq'] + 1} (consecutive within a batch)",
                              rec["seq"])
        cut_by_punch = False
        batch.append(rec)
        pos += rec["len"]
        if rec["flags"] & LAST_IN_BATCH:
            records.extend(batch)
            batches += 1
            batch = []
    if batch:
        if cut_by_punch and pos == data_end:
            records.extend(batch)  # its last records were punched out
            batches += 1
        else:  # the log ends before the batch does: it is left out
            stop = stop or "a batch without its LAST_IN_BATCH record"
            pos = batch[0]["offset"]
    return records, batches, pos, stop


def synced_after(data, end, data_end, version, records):
    """"End of the log": the end is damage, not a torn tail, when a valid record with
    SYNCED_BEFORE and a sequence above every record before it starts at any later offset."""
    top = max((r["seq"] for r in records), default=-1)
    for pos in range(end + 1, data_end - RECORD_HEADER + 1):
        if data[pos + 21] & SYNCED_BEFORE:
            rec = decode_record(data, pos, data_end, version)
            if not isinstance(rec, str) and rec["flags"] & SYNCED_BEFORE and rec["seq"] > top:
                return True
    return False


# --- Cross-checks ----------------------------------------------------------------------------


def check_database(db, allow_torn_tail=False):
    summary = {}
    files = classify_directory(db)
    current = read_current(db, files["manifests"])
    kinds = ("tables", "segments", "manifests", "tmp")
    summary["files"] = sum(len(files[k]) for k in kinds) + len(files["other"])

    # Every manifest decodes; the live one (CURRENT's) is the state checked below.
    states = {n: read_manifest(p) for n, p in sorted(files["manifests"].items())}
    state = states[current]
    mpath = files["manifests"][current]
    if state.torn is not None and not allow_torn_tail:
        raise FormatError(mpath, state.torn[0], "Record (manifest)",
                          "no torn append in a cleanly closed database", state.torn[1])
    summary["manifests"] = len(states)
    summary["manifest_format"] = state.version
    summary["manifest_edits"] = state.edits

    # "Directory layout": one counter for tables, manifests and temporary files.
    for kind in ("tables", "manifests", "tmp"):
        for n, p in files[kind].items():
            if n >= state.next_file_number:
                raise FormatError(p, None, "Directory layout",
                                  f"a number below next_file_number {state.next_file_number}", n)

    # Tables: every one present decodes; each listed one exists and matches its new_file.
    tables = {n: read_table(p) for n, p in sorted(files["tables"].items())}
    listed_tables = {}
    for lv, level in enumerate(state.levels):
        for n, (size, smallest, largest) in level.items():
            path = os.path.join(db, f"{n:06}.sst")
            if n not in tables:
                raise FormatError(mpath, None, "Directory layout",
                                  f"table {n:06}.sst listed (level {lv}) to exist", "no such file")
            t = tables[n]
            if (size, smallest, largest) != (t["size"], t["smallest"], t["largest"]):
                raise FormatError(path, None, "VersionEdit payload (tag 5 new_file)",
                                  f"file_size {size}, smallest {smallest!r}, largest {largest!r}",
                                  f"{t['size']}, {t['smallest']!r}, {t['largest']!r}")
            for _, seq, _, _, at in t["entries"]:
                if seq > state.last_sequence:
                    raise FormatError(path, at, "VersionEdit payload (tag 2 last_sequence)",
                                      f"sequences <= last_sequence {state.last_sequence}", seq)
            listed_tables[n] = t
    summary["tables"] = len(listed_tables)
    summary["unlisted_tables"] = len(tables) - len(listed_tables)
    summary["table_blocks"] = sum(t["blocks"] for t in listed_tables.values())
    summary["table_entries"] = sum(len(t["entries"]) for t in listed_tables.values())

    # Value log: which segments are live ("VersionEdit payload", tags 9/10 and the paragraph
    # on collected segments; a format-1 manifest has no segment set: every segment present).
    present = files["segments"]
    if state.version >= 2:
        for seg in state.segments:
            if seg not in present:
                raise FormatError(mpath, None, "VersionEdit payload (Segments)",
                                  f"listed segment {seg:06}.vlog to exist", "no such file")
        newest_listed = max(state.segments) if state.segments else 0
        live = sorted(set(state.segments) | {s for s in present if s > newest_listed})
        collected = sorted(s for s in present if s < newest_listed and s not in state.segments)
        next_seg = max([state.next_vlog_segment] + [s + 1 for s in state.segments])
    else:
        live, collected = sorted(present), []
        next_seg = max([state.next_vlog_segment] + [s + 1 for s in present])
    for s in present:
        # "End of the log": a segment numbered past both the newest other segment + 2 and
        # the manifest's next segment + 1 is moved away by open; none is left at rest.
        below = [t for t in present if t < s]
        if s > next_seg + 1 and (not below or s > max(below) + 2):
            raise FormatError(present[s], None, "End of the log",
                              f"no segment numbered past {next_seg + 1} "
                              f"and {max(below, default=0) + 2}", s)
    if state.head is None:
        raise FormatError(mpath, None, "VersionEdit payload (tag 6)", "a replay head", "none")
    head_seg, head_off = state.head
    if head_seg not in live:
        raise FormatError(mpath, None, "VersionEdit payload (tag 6 vlog_head)",
                          f"the head's segment {head_seg} to be live", f"live: {live}")

    # Decode every live segment's header; then its records up to the data end, which is the
    # next segment's prev_segment_end when that one directly follows and records one.
    raw, headers = {}, {}
    for s in live + collected:
        raw[s] = open(present[s], "rb").read()
        headers[s] = read_segment_header(raw[s], present[s], s)
    segments, records_by_pos, replay = {}, {}, []
    newest = live[-1] if live else None
    for s in live:
        data, path = raw[s], present[s]
        info = state.segments.get(s, {"sealed": None, "dead": 0, "punched": []})
        data_end = len(data)
        nxt = headers.get(s + 1) if s + 1 in live else None
        if nxt and nxt[1]:
            data_end = nxt[1]
            if data_end > len(data):
                raise FormatError(path, len(data), "End of the log",
                                  f"the file to reach prev_segment_end {data_end} of {s + 1:06}.vlog",
                                  f"{len(data)} bytes")
            if data_end < len(data):
                raise FormatError(path, data_end, "End of the log",
                                  "a finished segment cut to its last record (the prev_segment_end "
                                  f"{data_end} of {s + 1:06}.vlog) before the next is created",
                                  f"{len(data) - data_end} bytes after it")
        if s == 1 and headers[s][1] != 0:
            raise FormatError(path, 20, "Segment header",
                              "prev_segment_end 0 in the first segment of a log", headers[s][1])
        # "tag 11": size is the segment's final file length.
        if info["sealed"] is not None:
            if info["sealed"] != len(data):
                raise FormatError(path, None, "VersionEdit payload (tag 11 vlog_segment_sealed)",
                                  f"the file length {info['sealed']}", len(data))
            if s == newest:
                raise FormatError(path, None, "VersionEdit payload (tag 11 vlog_segment_sealed)",
                                  "a sealed segment to have a later one (the writer moved past it)",
                                  "it is the newest")
            if info["dead"] > len(data) - HEADER_SIZE:
                raise FormatError(path, None, "VersionEdit payload (tag 12 vlog_dead_bytes)",
                                  f"dead bytes <= the {len(data) - HEADER_SIZE} record bytes",
                                  info["dead"])
        if info["punched"] and s >= head_seg:
            raise FormatError(path, info["punched"][0][0], "Punched ranges",
                              f"punched segments to lie before the replay head's segment {head_seg}",
                              f"segment {s}")
        records, batches, end, stop = scan_segment(data, path, headers[s][0], data_end,
                                                   info["punched"])
        if end != data_end:
            torn_ok = (allow_torn_tail and s == newest
                       and not synced_after(data, end, data_end, headers[s][0], records))
            if not torn_ok:
                raise FormatError(path, end, "End of the log",
                                  f"complete batches of valid records up to {data_end}"
                                  + (" (a clean close cuts the active segment)" if s == newest else ""),
                                  stop)
        for r in records:
            r["segment"] = s
            records_by_pos[(s, r["offset"])] = r
            if s > head_seg or (s == head_seg and r["offset"] >= head_off):
                replay.append(r)
        head_ok = head_off in (end, HEADER_SIZE) or (s, head_off) in records_by_pos
        if s == head_seg and not head_ok:
            raise FormatError(mpath, None, "VersionEdit payload (tag 6 vlog_head)",
                              f"the head offset {head_off} at a record of {s:06}.vlog", "none there")
        segments[s] = {"records": len(records), "batches": batches,
                       "deletions": sum(1 for r in records if r["kind"] == KIND_DELETION)}
    # Collected segments (below the newest listed, not listed): open ignores them and the
    # obsolete-file sweep deletes them; their header must still verify, their records are
    # counted as far as they read (nothing guarantees them).
    collected_records = 0
    for s in collected:
        recs, _, _, _ = scan_segment(raw[s], present[s], headers[s][0], len(raw[s]), [])
        collected_records += len(recs)
    summary["segments"] = len(live)
    summary["segment_formats"] = ",".join(sorted({str(headers[s][0]) for s in live}))
    summary["collected_segments"] = len(collected)
    summary["collected_records"] = collected_records
    summary["records"] = sum(v["records"] for v in segments.values())
    summary["deletion_records"] = sum(v["deletions"] for v in segments.values())
    summary["batches"] = sum(v["batches"] for v in segments.values())
    summary["punched_ranges"] = sum(len(v["punched"]) for v in state.segments.values())
    summary["replay_records"] = len(replay)

    # Keys: the newest entry per user key among the listed tables and the log after the
    # replay head; every value pointer must name a record in a live segment with its key.
    newest_entry = {}
    counts = {"pointers": 0, "inline": 0, "tombstones": 0}
    for n, t in listed_tables.items():
        path = os.path.join(db, f"{n:06}.sst")
        for user_key, seq, kind, value, at in t["entries"]:
            counts[("tombstones", "inline", "pointers")[kind]] += 1
            old = newest_entry.get(user_key)
            if old is None or seq > old[0]:
                newest_entry[user_key] = (seq, kind, value, path, at)
    for r in replay:
        old = newest_entry.get(r["key"])
        if old is None or r["seq"] > old[0]:
            newest_entry[r["key"]] = (r["seq"], r["kind"], None, None, None)
    # "ValuePointer": the newest version's pointer names a value record of its key and
    # sequence in a live segment, outside the punched ranges. An older (shadowed) version's
    # pointer may name a record GC has since removed or punched (GC relocates by appending
    # a new version); where that record is still there, it must match too.
    dead_pointers = 0
    for n, t in listed_tables.items():
        path = os.path.join(db, f"{n:06}.sst")
        for user_key, seq, kind, value, at in t["entries"]:
            if kind != KIND_POINTER:
                continue
            seg, off, length = value
            shadowed = newest_entry[user_key][0] != seq
            punched = state.segments.get(seg, {}).get("punched", [])
            gone = seg not in live or any(a <= off < b for a, b in punched)
            if shadowed and gone:
                dead_pointers += 1
                continue
            rec = records_by_pos.get((seg, off))
            if rec is None:
                raise FormatError(path, at, "ValuePointer",
                                  f"a record at offset {off} of live segment {seg:06}.vlog, not punched",
                                  "a punched range" if seg in live and gone else
                                  "no record there" if seg in live else f"segment {seg} not live")
            if (rec["len"], rec["key"], rec["kind"]) != (length, user_key, KIND_VALUE):
                raise FormatError(path, at, "ValuePointer",
                                  f"a {length}-byte value record of key {user_key!r}",
                                  f"{rec['len']} bytes, key {rec['key']!r}, kind {rec['kind']}")
            if rec["seq"] != seq:
                raise FormatError(path, at, "ValuePointer",
                                  f"the record's sequence = the entry's ({seq})", rec["seq"])
    counts["dead_pointers"] = dead_pointers

    # "tag 12": dead bytes count record bytes no reader needs, so a segment's dead bytes are
    # at most its record bytes less those of the records the newest versions point at and
    # those after the replay head (replay reads them).
    needed = {}
    for user_key, (seq, kind, value, _, _) in newest_entry.items():
        if kind == KIND_POINTER and value is not None:
            needed[value[0]] = needed.get(value[0], 0) + value[2]
    for r in replay:
        needed[r["segment"]] = needed.get(r["segment"], 0) + r["len"]
    for seg in live:
        info = state.segments.get(seg)
        if info is None:
            continue
        end = info["sealed"] if info["sealed"] is not None else len(raw[seg])
        room = end - HEADER_SIZE - needed.get(seg, 0)
        if info["dead"] > room:
            raise FormatError(present[seg], None, "VersionEdit payload (tag 12 vlog_dead_bytes)",
                              f"dead bytes <= {room} (record bytes {end - HEADER_SIZE} less "
                              f"{needed.get(seg, 0)} a reader needs)", info["dead"])

    # "Internal keys and LSM values": an inline value is the user value itself, so where the
    # record of the same key and sequence is still in the log, it holds the same bytes.
    by_key_seq = {(r["key"], r["seq"]): (s, r) for (s, _), r in records_by_pos.items()}
    inline_checked = 0
    for n, t in listed_tables.items():
        for user_key, seq, kind, value, at in t["entries"]:
            found = by_key_seq.get((user_key, seq)) if kind == KIND_VALUE else None
            if found is None:
                continue
            seg, r = found
            logged = raw[seg][r["value_at"] : r["offset"] + r["len"]]
            if logged != value:
                raise FormatError(os.path.join(db, f"{n:06}.sst"), at, "Internal keys and LSM values",
                                  f"the inline value = the value of record {seg:06}.vlog@{r['offset']}",
                                  f"{len(value)} bytes vs {len(logged)}")
            inline_checked += 1
    counts["inline_checked"] = inline_checked
    summary.update(counts)
    summary["live_keys"] = sum(1 for e in newest_entry.values() if e[1] != KIND_DELETION)
    summary["deleted_keys"] = sum(1 for e in newest_entry.values() if e[1] == KIND_DELETION)
    return summary


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = [a for a in argv[1:] if a.startswith("--")]
    if len(args) != 1 or set(flags) - {"--allow-torn-tail"}:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        summary = check_database(args[0], "--allow-torn-tail" in flags)
    except FormatError as e:
        print(f"format_reader: FAIL: {e}", file=sys.stderr)
        return 1
    except (OSError, struct.error, IndexError) as e:
        print(f"format_reader: FAIL: {e!r}", file=sys.stderr)
        return 1
    print(f"format_reader: OK {args[0]}")
    for k, v in summary.items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
