package audit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"

	"github.com/nsbox/nsbox/sandbox/result"
)

// Each encoding of a row starts with its own domain string, so no row's
// encoding under one version is its encoding under another. A new encoding
// gets a new version and domain; a released one never changes, since rows
// in the field are hashed under it.
const (
	chainDomainV1 = "nsbox audit chain v1\x00" // fields 1-24 and prev_hash
	chainDomainV2 = "nsbox audit chain v2\x00" // v1's fields, then reason and the supervisor
	chainDomainV3 = "nsbox audit chain v3\x00" // v2's fields, then the network and its connections
	chainDomainV4 = "nsbox audit chain v4\x00" // v3's fields, then the standard input's digest and length
)

// chainVersion is the encoding Finish hashes rows with.
const chainVersion = 4

// The tags of the canonical encoding (package doc).
const (
	tagNull  = 0x00
	tagInt   = 0x01
	tagBytes = 0x02
	tagList  = 0x03
)

// encoder writes the canonical encoding of one row into a hash.
type encoder struct {
	h   hash.Hash
	buf [9]byte
}

func (e *encoder) null() { e.h.Write([]byte{tagNull}) }

func (e *encoder) int(v int64) {
	e.buf[0] = tagInt
	binary.BigEndian.PutUint64(e.buf[1:], uint64(v))
	e.h.Write(e.buf[:])
}

func (e *encoder) head(tag byte, n int) {
	e.buf[0] = tag
	binary.BigEndian.PutUint64(e.buf[1:], uint64(n))
	e.h.Write(e.buf[:])
}

func (e *encoder) bytes(b []byte) { e.head(tagBytes, len(b)); e.h.Write(b) }

func (e *encoder) str(s string) { e.head(tagBytes, len(s)); e.h.Write([]byte(s)) }

func (e *encoder) optStr(s *string) {
	if s == nil {
		e.null()
		return
	}
	e.str(*s)
}

func optInt[T int | int64](e *encoder, v *T) {
	if v == nil {
		e.null()
		return
	}
	e.int(int64(*v))
}

func (e *encoder) bool(b bool) { e.int(int64(boolInt(b))) }

// knownChainVersion reports whether rowHash can encode version v.
func knownChainVersion(v int) bool { return v >= 1 && v <= 4 }

// rowHash returns the hash of r under the encoding r.ChainVersion (1 to
// 4) as the package doc defines it, from r.Seq and r.PrevHash and the
// recorded fields; r.Hash is not read.
func rowHash(r *Run) string {
	e := &encoder{h: sha256.New()}
	switch r.ChainVersion {
	case 1:
		e.h.Write([]byte(chainDomainV1))
	case 2:
		e.h.Write([]byte(chainDomainV2))
	case 3:
		e.h.Write([]byte(chainDomainV3))
	default:
		e.h.Write([]byte(chainDomainV4))
	}
	e.int(r.Seq)
	e.str(r.ID)
	e.int(r.Start.UnixNano())
	e.int(r.End.UnixNano())
	e.int(r.DurationMS)
	e.str(r.Policy)
	e.str(r.PolicySHA256)
	e.str(r.RootManifestSHA256)
	e.str(r.CodeSHA256)
	e.optStr(r.Code)
	e.str(r.Status)
	optInt(e, r.ExitCode)
	optInt(e, r.Signal)
	optInt(e, r.CPUMS)
	optInt(e, r.PeakMemoryBytes)
	e.int(r.StdoutBytes)
	e.int(r.StderrBytes)
	e.bytes(r.StdoutHead)
	e.bytes(r.StderrHead)
	e.bool(r.StdoutTruncated)
	e.bool(r.StderrTruncated)
	e.head(tagList, len(r.Violations))
	for _, v := range r.Violations {
		e.str(v.Kind)
		e.str(v.Name)
		e.int(int64(v.Line))
		e.int(int64(v.Col))
		e.str(v.Detail)
	}
	keys := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys) // Go compares strings bytewise
	e.head(tagList, len(keys))
	for _, k := range keys {
		e.str(k)
		e.str(r.Labels[k])
	}
	e.str(r.NsboxVersion)
	if r.ChainVersion != 1 {
		e.str(r.Reason)
		if s := r.Supervisor; s == nil {
			for range 5 {
				e.null()
			}
		} else {
			e.str(s.MachineID)
			e.str(s.BootID)
			e.int(s.PID)
			e.int(s.StartTicks)
			e.str(s.Namespaces)
		}
	}
	if r.ChainVersion >= 3 {
		e.network(r.Network)
	}
	if r.ChainVersion >= 4 {
		e.str(r.StdinSHA256)
		e.int(r.StdinBytes)
	}
	e.str(r.PrevHash)
	return hex.EncodeToString(e.h.Sum(nil))
}

// network encodes the network fields: mode, proxy, connections_dropped,
// refused, bytes_sent, bytes_received, then the connections as a list of
// ten values each. A run without network (nil) is encoded as its columns
// are stored: "", "", four zeros and an empty list.
func (e *encoder) network(n *result.Network) {
	if n == nil {
		n = &result.Network{}
	}
	e.str(n.Mode)
	e.str(n.Proxy)
	e.int(int64(n.ConnectionsDropped))
	e.int(int64(n.Refused))
	e.int(n.BytesSent)
	e.int(n.BytesReceived)
	e.head(tagList, len(n.Connections))
	for _, c := range n.Connections {
		e.str(c.Host)
		e.int(int64(c.Port))
		e.str(c.Method)
		e.str(c.Address)
		e.bool(c.Allowed)
		e.str(c.Reason)
		e.int(c.BytesSent)
		e.int(c.BytesReceived)
		e.int(c.StartMS)
		e.int(c.DurationMS)
	}
}

// Break is the first row where the chain is broken.
type Break struct {
	Seq    int64  `json:"seq"` // 0 for a finished row that has no seq
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

func (b *Break) String() string {
	return fmt.Sprintf("seq %d (run %s): %s", b.Seq, b.ID, b.Reason)
}

// Verification is the outcome of walking the chain.
type Verification struct {
	Rows     int64  `json:"rows"`      // finished rows checked
	HeadSeq  int64  `json:"head_seq"`  // seq of the last row checked; 0 when none
	HeadHash string `json:"head_hash"` // its hash; genesis (64 "0") when none
	Break    *Break `json:"break"`     // nil when intact
}

// Verify checks the hash chain and returns the first broken row, or nil
// when the chain is intact (package doc: what is checked, and what cannot
// be).
func (db *DB) Verify() (*Break, error) {
	v, err := db.VerifyChain()
	if err != nil {
		return nil, err
	}
	return v.Break, nil
}

// VerifyChain is Verify with the number of rows checked and the head of the
// chain, which can be recorded elsewhere to detect a rewrite of the newest
// rows later.
func (db *DB) VerifyChain() (*Verification, error) {
	var v *Verification
	err := db.readTx(context.Background(), func(q querier) error {
		var err error
		v, err = verify(context.Background(), q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("verify audit db %s: %w", db.path, err)
	}
	return v, nil
}

func verify(ctx context.Context, q querier) (*Verification, error) {
	v := &Verification{HeadHash: genesisHash}
	broke := func(r *Run, format string, args ...any) error {
		v.Break = &Break{Seq: r.Seq, ID: r.ID, Reason: fmt.Sprintf(format, args...)}
		return errStop
	}
	err := scanChain(ctx, q, func(r *Run, rerr error) error {
		switch {
		case rerr != nil:
			return broke(r, "unreadable row: %v", rerr)
		case r.Seq != v.HeadSeq+1:
			return broke(r, "seq %d where %d was expected: row(s) missing before it", r.Seq, v.HeadSeq+1)
		case r.PrevHash != v.HeadHash:
			return broke(r, "prev_hash %s is not the hash of the row before (%s): a row before it was removed or rewritten",
				short(r.PrevHash), short(v.HeadHash))
		case !knownChainVersion(r.ChainVersion):
			return broke(r, "chain_version %d is not an encoding this nsbox knows", r.ChainVersion)
		case r.ChainVersion == 1 && (r.Reason != "" || r.Supervisor != nil):
			// Encoding 1 does not cover these fields: rows hashed under
			// it were written before they existed, so they have none.
			return broke(r, "reason or supervisor set on a row whose hash (encoding 1) does not cover them: the row was edited")
		case r.ChainVersion < 3 && r.Network != nil:
			// Likewise for the network fields and encodings 1 and 2.
			return broke(r, "network fields or connections set on a row whose hash (encoding %d) does not cover them: the row was edited",
				r.ChainVersion)
		case r.ChainVersion < 4 && (r.StdinSHA256 != "" || r.StdinBytes != 0):
			// And for the standard input and encodings 1 to 3.
			return broke(r, "stdin_sha256 or stdin_bytes set on a row whose hash (encoding %d) does not cover them: the row was edited",
				r.ChainVersion)
		}
		if got := rowHash(r); got != r.Hash {
			return broke(r, "hash %s does not match its fields (%s): the row was edited", short(r.Hash), short(got))
		}
		v.Rows++
		v.HeadSeq, v.HeadHash = r.Seq, r.Hash
		return nil
	})
	if err != nil || v.Break != nil {
		return v, err
	}
	// A finished row moved out of the chain (seq set to NULL) breaks the
	// link after it, unless it was the last; this finds that case too.
	var id, status string
	err = q.QueryRowContext(ctx, `SELECT id, status FROM runs WHERE seq IS NULL AND status != ? LIMIT 1`,
		StatusUnfinished).Scan(&id, &status)
	if err == nil {
		v.Break = &Break{ID: id, Reason: fmt.Sprintf("status %q but not in the chain (no seq)", status)}
		return v, nil
	}
	if !isNoRows(err) {
		return nil, fmt.Errorf("look for finished rows outside the chain: %w", err)
	}
	v.Break, err = checkComplete(ctx, q)
	return v, err
}

// short abbreviates a hash for messages.
func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	if h == "" {
		return `""`
	}
	return h
}
