package job

import (
	"io"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nsbox/nsbox/sandbox/audit"
	"github.com/nsbox/nsbox/sandbox/plan"
	"github.com/nsbox/nsbox/sandbox/result"
	"github.com/nsbox/nsbox/sandbox/supervisor"
)

// testNetwork is a result's network section: one connection relayed, one
// refused.
func testNetwork() *result.Network {
	return &result.Network{Mode: result.NetworkAllowlist, Proxy: "127.0.0.1:3128", Refused: 1,
		BytesSent: 120, BytesReceived: 4096, Connections: []result.Connection{
			{Host: "api.example.com", Port: 443, Method: result.ConnectTunnel, Address: "192.0.2.7:443", Allowed: true,
				BytesSent: 120, BytesReceived: 4096, StartMS: 12, DurationMS: 80},
			{Host: "other.example.com", Port: 443, Method: result.ConnectTunnel, Reason: "not on the allow list",
				StartMS: 95},
		}}
}

// TestFinishRecordNetwork: a run's row and a refused run's row carry the
// result's network section, and the chain covers it.
func TestFinishRecordNetwork(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec, err := BeginRecord(db, "netrun", plan.Policy{Name: "web", SHA256: "ab"}, []byte("print(1)"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := result.New("netrun", "web")
	r.Status = result.StatusOK
	r.Network = testNetwork()
	r.Violations = []result.Violation{{Kind: result.ViolationNetwork, Name: "other.example.com:443", Detail: "refused"}}
	if err := FinishRecord(db, rec, r, supervisor.Stats{}); err != nil {
		t.Fatal(err)
	}
	refused := result.New("refused", "web")
	refused.Status = result.StatusSandboxError
	refused.Error = result.StepError("input", io.ErrUnexpectedEOF)
	refused.Network = &result.Network{Mode: result.NetworkAllowlist, Connections: []result.Connection{}}
	RecordRefused(path, refused, time.Now(), t.Output())

	got, err := db.Get("netrun")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Network, testNetwork()) || len(got.Violations) != 1 {
		t.Errorf("row's network %+v, violations %+v; want the result's", got.Network, got.Violations)
	}
	if got, err := db.Get("refused"); err != nil || got.Network == nil || got.Network.Mode != result.NetworkAllowlist {
		t.Errorf("refused run's row: %+v, %v; want its network section", got, err)
	}
	if b, err := db.Verify(); err != nil || b != nil {
		t.Errorf("Verify = %v, %v", b, err)
	}
}
