package policies

import (
	"reflect"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

func TestSizeParse(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"512B", 512, true},
		{"0B", 0, true},
		{"64KiB", 64 << 10, true},
		{"1MiB", 1 << 20, true},
		{"16GiB", 16 << 30, true},
		{"0064KiB", 64 << 10, true},
		{"8589934591GiB", 8589934591 << 30, true},
		{"8589934592GiB", 0, false}, // overflows int64
		{"99999999999999999999B", 0, false},
		{"64KB", 0, false},
		{"64kib", 0, false},
		{"64 KiB", 0, false},
		{"1.5MiB", 0, false},
		{"-1KiB", 0, false},
		{"+1KiB", 0, false},
		{"64", 0, false},
		{"KiB", 0, false},
		{"B", 0, false},
		{"", 0, false},
		{"1TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1023, "1023B"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{64 << 10, "64KiB"},
		{1 << 20, "1MiB"},
		{3 << 29, "1536MiB"},
		{16 << 30, "16GiB"},
		{-2048, "-2KiB"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

func TestSizeRoundTrip(t *testing.T) {
	for _, s := range []Size{0, 1, 512, 1000, 1024, 4097, 64 << 10, 1 << 20, 5 << 30, 1<<63 - 1, 1 << 62} {
		text, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Size
		if err := back.UnmarshalText(text); err != nil || back != s {
			t.Errorf("Size %d -> %q -> %d, %v", int64(s), text, int64(back), err)
		}
	}
}

// TestTOMLRoundTrip checks that Policy.TOML writes a document that Parse
// accepts unchanged, and that Size works with the toml package directly.
func TestTOMLRoundTrip(t *testing.T) {
	for _, name := range BuiltinNames() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		p.Env["TZ"] = "UTC"
		data := p.TOML()
		q, err := Parse(name, data)
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		q.SHA256 = p.SHA256 // of the text, which differs
		if !reflect.DeepEqual(p, q) {
			t.Errorf("round trip of %s: got %+v, want %+v", name, q, p)
		}
	}
	var s struct{ A, B Size }
	if _, err := toml.Decode("A = 2048\nB = \"3MiB\"", &s); err != nil || s.A != 2*kib || s.B != 3*mib {
		t.Errorf("decode sizes = %+v, %v", s, err)
	}
	if _, err := toml.Decode("A = 1.5", &s); err == nil {
		t.Error("decode float size: no error")
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{10 * time.Second, "10s"},
		{24 * time.Hour, "24h"},
		{90 * time.Minute, "1h30m"},
		{time.Hour + time.Second, "1h0m1s"},
		{100 * time.Millisecond, "100ms"},
		{2 * time.Minute, "2m"},
		{0, "0s"},
	}
	for _, tt := range tests {
		d := Duration{tt.d}
		if d.String() != tt.want {
			t.Errorf("Duration(%v).String() = %q, want %q", tt.d, d.String(), tt.want)
		}
		text, _ := d.MarshalText()
		var back Duration
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Errorf("Duration %v -> %q -> %v, %v", tt.d, text, back, err)
		}
	}
	var d Duration
	if err := d.UnmarshalText([]byte("10 seconds")); err == nil {
		t.Error(`UnmarshalText("10 seconds"): no error`)
	}
}
