// Package audit records every nsbox run in an embedded SQLite database and
// answers questions about the runs recorded: what ran, under which policy,
// how it ended, what the Python policy layer refused. Finished rows are
// hash-chained so that editing or deleting one is detected by Verify.
//
// # Location
//
// The database is DefaultPath (/var/lib/nsbox/audit.db). The environment
// variable NSBOX_AUDIT_DB overrides it, and an --audit-db flag overrides both
// (Path). The file holds programs and their output: it is created 0600 in a
// directory created 0700, and SQLite gives its -wal and -shm files the same
// mode as the database.
//
// # Life of a row
//
//	Begin   at run start: the row is inserted with status "unfinished", so a
//	        supervisor killed mid-run leaves a row that says so
//	Finish  at run end: every field is written, and the row is given the next
//	        seq, the previous finished row's hash as prev_hash, and its own hash
//
// Unfinished rows are outside the chain until finished.
//
// # Schema (version 1)
//
//	schema_version  version, applied_at: one row per migration applied
//	runs            one row per run; seq, prev_hash and hash are NULL until Finish
//	run_labels      run_id, key, value: the caller's --label key=value pairs
//	run_violations  run_id, idx, kind, name, line, col, detail: result.Violation, in order
//
// Times are integer Unix nanoseconds (UTC); the outputs' heads are BLOBs;
// booleans are 0 or 1. Labels and violations are tables rather than JSON so
// that they are queried and hashed as plain values.
//
// # Hash chain
//
// A finished row's hash is the lowercase hex SHA-256 of its canonical
// encoding: the 21 bytes "nsbox audit chain v1\x00" followed by these
// fields, in this order, each as a tagged value:
//
//	 1 seq                    integer, 1 for the first finished row
//	 2 id                     bytes
//	 3 start                  integer, Unix nanoseconds
//	 4 end                    integer, Unix nanoseconds
//	 5 duration_ms            integer
//	 6 policy                 bytes
//	 7 policy_sha256          bytes
//	 8 root_manifest_sha256   bytes
//	 9 code_sha256            bytes
//	10 code                   bytes, or NULL when not stored
//	11 status                 bytes
//	12 exit_code              integer or NULL
//	13 signal                 integer or NULL
//	14 cpu_ms                 integer or NULL
//	15 peak_memory_bytes      integer or NULL
//	16 stdout_bytes           integer
//	17 stderr_bytes           integer
//	18 stdout_head            bytes
//	19 stderr_head            bytes
//	20 stdout_truncated       integer, 0 or 1
//	21 stderr_truncated       integer, 0 or 1
//	22 violations             list; each violation is five values: kind,
//	                          name (bytes), line, col (integers), detail (bytes)
//	23 labels                 list, sorted by key bytewise; each label is two
//	                          values: key, value (bytes)
//	24 nsbox_version          bytes
//	25 prev_hash              bytes: the previous finished row's hash, or 64
//	                          "0" for the first
//
// The tagged values are:
//
//	0x00                                   NULL
//	0x01, 8-byte big-endian int64          integer
//	0x02, 8-byte big-endian length, bytes  bytes, exactly as stored (no
//	                                       normalisation; text is not re-encoded)
//	0x03, 8-byte big-endian count, items   list
//
// The tags keep NULL, 0 and "" apart and the lengths keep field boundaries
// unambiguous, so no two different rows share an encoding. Everything hashed
// is in Export's output (bytes that are not valid UTF-8 carry a _base64
// twin), so an export can be checked without this package.
//
// Verify walks the finished rows in seq order and reports the first whose
// seq is not the previous plus one, whose prev_hash is not the previous row's
// hash, or whose recomputed hash differs from the stored one; after the walk,
// a row with a final status but no seq (taken out of the chain) is reported
// too. So an edit of any recorded field of any finished row, and the deletion
// of any finished row but the last, is found.
//
// What the chain does not do: it has no secret, so someone who can write the
// file can rewrite a row and every hash after it, or delete the newest rows.
// Record the head (seq and hash, printed by `nsbox audit verify`) somewhere
// else to detect that. Unfinished rows are not chained.
//
// # Concurrency and cost
//
// Each nsbox process opens the database for one run. A new database is
// built under a temporary name (schema, journal_mode=WAL) and linked into
// place, so concurrent first runs never see a half-made one. Connections use
// a busy timeout of five seconds; Begin and Finish are BEGIN IMMEDIATE
// transactions, retried with backoff while SQLite still reports the database
// busy. Finish takes the next seq inside its transaction, so concurrent
// finishers serialize and the chain stays linear.
//
// synchronous=NORMAL: in WAL mode a commit is then written to the WAL but not
// fsynced; a crash of nsbox loses nothing, a power loss can lose the commits
// since the last checkpoint, never corrupt the file or the chain (the WAL is
// replayed as a prefix of whole transactions). That trade keeps Begin and
// Finish well under a millisecond instead of an fsync per commit. Checkpoints
// happen every 1000 WAL pages and when the last connection to the database
// closes, so on a host where runs do not overlap each run's rows are on disk
// when its nsbox exits (Close then costs those fsyncs).
//
// # Build
//
// The package needs cgo (github.com/mattn/go-sqlite3, SQLite compiled in).
// For the static nsbox binary build with the tag sqlite_omit_load_extension:
// SQLite's run-time extension loading needs dlopen, which a static glibc
// binary cannot use, and this package loads no extension.
package audit
