// Package audit records every nsbox run in an embedded SQLite database and
// answers questions about the runs recorded: what ran, under which policy,
// how it ended, what the Python policy layer refused, which hosts it reached
// through the network proxy. Finished rows are hash-chained so that editing
// or deleting one is detected by Verify.
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
//	Begin   at run start: the row is inserted with status "unfinished" and
//	        the identity of the process that began it (its supervisor), so
//	        a supervisor killed mid-run leaves a row that says so
//	Finish  at run end: every field is written, and the row is given the next
//	        seq, the previous finished row's hash as prev_hash, and its own hash
//	Reap    in a later process, for a row whose supervisor is gone for good:
//	        the row is finished as status "killed", reason "supervisor died"
//	        (Orphaned rows, below)
//
// Unfinished rows are outside the chain until finished.
//
// # Schema (version 4)
//
//	schema_version   version, applied_at: one row per migration applied
//	runs             one row per run; seq, prev_hash and hash are NULL until Finish
//	run_labels       run_id, key, value: the caller's --label key=value pairs
//	run_violations   run_id, idx, kind, name, line, col, detail: result.Violation, in order
//	run_connections  run_id, idx, host, port, method, address, allowed, reason,
//	                 bytes_sent, bytes_received, start_ms, duration_ms:
//	                 result.Connection, in order
//
// Times are integer Unix nanoseconds (UTC); the outputs' heads are BLOBs;
// booleans are 0 or 1. Labels, violations and connections are tables rather
// than JSON so that they are queried and hashed as plain values; an index on
// run_connections (host, without regard to ASCII case, then run_id) finds
// the runs that talked to a host.
//
// Version 2 added to runs: reason (why the run ended: the result's reason,
// a sandbox error's step and message, or "supervisor died"; empty in older
// rows), the supervisor's identity (supervisor_machine_id,
// supervisor_boot_id, supervisor_pid, supervisor_start_ticks,
// supervisor_ns: all five NULL when none was recorded, as in older rows) and chain_version (the encoding a finished
// row's hash is of; 1 in older rows, 0 while unfinished). Version 3 added
// the network section of the result: on runs, network (the mode, "" for a
// run without network, as in older rows), net_proxy,
// net_connections_dropped, net_refused, net_bytes_sent and
// net_bytes_received ("" and zeros without network), and the table
// run_connections. Version 4 added the program's standard input to runs:
// stdin_sha256 (the hex SHA-256 of all of it, "" for a run given none, as
// in older rows) and stdin_bytes. Migrations only
// append steps (schema.go): a database is migrated in place when a newer
// nsbox opens it, with ADD COLUMN, which rewrites no row; an older nsbox
// then refuses it.
//
// # Hash chain
//
// A finished row's hash is the lowercase hex SHA-256 of its canonical
// encoding under the version in its chain_version. Encoding 4, which Finish
// and Reap write, is the 21 bytes "nsbox audit chain v4\x00" followed by
// these fields, in this order, each as a tagged value:
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
//	25 reason                 bytes
//	26 supervisor_machine_id  bytes, or NULL when no supervisor was recorded
//	27 supervisor_boot_id     bytes, or NULL likewise
//	28 supervisor_pid         integer, or NULL likewise
//	29 supervisor_start_ticks integer, or NULL likewise
//	30 supervisor_ns          bytes, or NULL likewise
//	31 network                bytes: the mode, "" for a run without network
//	32 net_proxy              bytes
//	33 net_connections_dropped integer
//	34 net_refused            integer
//	35 net_bytes_sent         integer
//	36 net_bytes_received     integer
//	37 connections            list, in idx order; each connection is ten
//	                          values: host (bytes), port (integer), method,
//	                          address, allowed (integer, 0 or 1), reason
//	                          (bytes), bytes_sent, bytes_received,
//	                          start_ms, duration_ms (integers)
//	38 stdin_sha256           bytes: "" for a run given no input
//	39 stdin_bytes            integer
//	40 prev_hash              bytes: the previous finished row's hash, or 64
//	                          "0" for the first
//
// A run without network is encoded as it is stored: "", "", four zeros and
// an empty list (Finish refuses a network section without a mode, so no
// run with network encodes so).
//
// Encoding 3, of the rows finished under schema version 3, is the 21 bytes
// "nsbox audit chain v3\x00" followed by fields 1-37 and prev_hash;
// encoding 2, of those finished under schema version 2,
// "nsbox audit chain v2\x00" followed by fields 1-30 and prev_hash, and
// encoding 1, of the rows finished before it, "nsbox audit chain v1\x00"
// followed by fields 1-24 and prev_hash. They do not cover the columns the
// later versions added, so Verify requires those empty in a row hashed
// under them: no input under encoding 3; that, no network and no
// connections under encoding 2; that, an
// empty reason and no supervisor under encoding 1. Each encoding starts
// with its own domain string, so no row hashes alike under two, and a row
// whose chain_version was edited no longer matches its hash. A log may hold
// all four: the chain goes on from the last row of one encoding to the
// first of the next like any two rows.
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
// hash, whose chain_version is unknown, whose labels, violations or
// connections do not read back (an idx missing, a column of the wrong type,
// a connection's allowed other than 0 or 1), or whose recomputed hash differs from the
// stored one; after the walk,
// a row with a final status but no seq (taken out of the chain) is reported
// too, and so are a label, violation or connection row of no chained run
// (labels of an unfinished run excepted), a schema_version table other than
// 1..SchemaVersion, and a table, index, trigger or view other than what the
// migrations build (checkComplete). So an edit of any recorded field of any
// finished row, and the deletion of any finished row but the last, is
// found. List and Stats count only rows in the chain and unfinished ones;
// Stats reports the others as OutOfChain.
//
// What the chain does not do: it has no secret, so someone who can write the
// file can rewrite a row and every hash after it, or delete the newest rows.
// Record the head (seq and hash, printed by `nsbox audit verify`) somewhere
// else to detect that. Unfinished rows are not chained.
//
// # Orphaned rows
//
// A supervisor killed mid-run (SIGKILL, a crash, a reboot) leaves its row
// unfinished, and nothing else will finish it. Reap finds such rows and
// finishes them, so that the log says what happened: status killed, reason
// "supervisor died", and what Begin recorded (start, policy, hashes, code,
// labels) kept. nsbox run reaps a few in the background after its own Begin
// (ReapInRun: 64 rows looked at, 8 finished, at most a second); every nsbox
// audit command reaps them all before it reads.
//
// The log may be shared by every nsbox on the host, whatever their state
// directories, so a row must say which process can still finish it. Begin
// records its supervisor: the machine id (/etc/machine-id), the boot id
// (/proc/sys/kernel/random/boot_id), the pid, the process's start time
// (field 22 of /proc/PID/stat, clock ticks since boot) and its PID and time
// namespaces (readlink of /proc/self/ns/pid and /proc/self/ns/time). A
// reaper finishes a row when, in this order:
//
//   - the machine id is its own and the boot id is not: the supervisor died
//     before this boot. End: when this boot began. (SQLite in WAL mode works
//     only among processes of one host, so a shared log is this machine's;
//     another machine id is a copy of another machine's log, where the boot
//     id says nothing.)
//   - it is in the same PID and time namespaces, its /proc shows its own
//     PID namespace, and kill(pid, 0) reports no such process (not /proc,
//     which hidepid can hide). End: when found.
//   - the pid is alive but started at another time: the pid was reused, so
//     the supervisor died before that process started. End: the end of the
//     tick that process started in.
//   - the pid is a zombie that is a whole process, not a thread-group leader
//     whose other threads run on: it died and will never finish. End: when
//     found.
//   - it cannot judge the supervisor (none recorded, as in rows from before
//     schema version 2; another machine; another PID or time namespace,
//     where the pid and start time mean something else; no boot id): only
//     once the row is
//     older than MaxRunAge, 25h, the longest run a policy allows (24h) and
//     a margin. End: when found.
//
// Anything else, a live process with the recorded pid and start time
// included, leaves the row unfinished: a reaper never finishes a row whose
// supervisor may still finish it. The end is a bound, not a measurement:
// the supervisor died at or before it; duration_ms is end - start, and
// Stats leaves these rows out of the policies' durations. Afterwards a
// supervisor that was killed cannot be told from one that exited without
// finishing its row (its Finish failed, which it reported on stderr), and
// both rows end so: what such a row asserts is that its supervisor ended
// without recording how the run ended.
//
// Two reapers, or a reaper and a supervisor, never finish a row twice: a
// reaper finishes each row in its own BEGIN IMMEDIATE transaction that reads
// it again and skips it when it is no longer unfinished (or no longer the
// row it judged), and Finish's update applies only to a row without a seq.
// A reaper's attempt waits at most 50ms for the write lock and it stops when
// its context ends, so a locked log does not hold up the run that reaps.
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
