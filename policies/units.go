package policies

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML as a Go duration string
// ("10s", "1m30s", "500ms").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string with time.ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (want e.g. \"10s\", \"1m30s\", \"500ms\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in the form UnmarshalText reads.
func (d Duration) MarshalText() ([]byte, error) { return []byte(fmtDuration(d.Duration)), nil }

// String prints the duration without zero components: "24h", not "24h0m0s".
func (d Duration) String() string { return fmtDuration(d.Duration) }

// fmtDuration is time.Duration.String without trailing zero units, so that
// messages echo limits the way a policy author writes them.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Size is a byte count. In TOML it is either a string with a binary unit
// ("512B", "64KiB", "1MiB", "1GiB") or an integer number of bytes.
type Size int64

// Binary units, largest first: String picks the largest that divides evenly.
const (
	kib Size = 1 << 10
	mib Size = 1 << 20
	gib Size = 1 << 30
)

var sizeUnits = []struct {
	suffix string
	mult   Size
}{{"GiB", gib}, {"MiB", mib}, {"KiB", kib}, {"B", 1}}

// sizeSyntax is the "allowed" text for a malformed size.
const sizeSyntax = `a whole number with unit B, KiB, MiB or GiB, e.g. "64KiB", or an integer number of bytes`

// parseSize reads "<digits><unit>"; units are case-sensitive and binary
// (KiB = 1024 B). Decimal units (KB, MB) are refused rather than guessed.
func parseSize(s string) (Size, error) {
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		if num == "" || strings.TrimLeft(num, "0123456789") != "" {
			break
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > int64(1<<63-1)/int64(u.mult) {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return Size(n) * u.mult, nil
	}
	return 0, fmt.Errorf("%q is not a size", s)
}

// String prints the size with the largest binary unit that divides it evenly:
// 65536 is "64KiB", 1536 is "1536B".
func (s Size) String() string {
	for _, u := range sizeUnits {
		if s != 0 && s%u.mult == 0 {
			return strconv.FormatInt(int64(s/u.mult), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// UnmarshalText parses a size string such as "64KiB".
func (s *Size) UnmarshalText(b []byte) error {
	v, err := parseSize(string(b))
	if err != nil {
		return fmt.Errorf("%w (want %s)", err, sizeSyntax)
	}
	*s = v
	return nil
}

// UnmarshalTOML accepts a size string or a TOML integer number of bytes.
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		return s.UnmarshalText([]byte(v))
	case int64:
		*s = Size(v)
		return nil
	}
	return fmt.Errorf("a size must be %s, not %s", sizeSyntax, tomlType(v))
}

// MarshalText writes the size in the form UnmarshalText reads.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// tomlType names the TOML type of a decoded value for error messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case []map[string]any:
		return "an array of tables"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date-time"
	}
	return fmt.Sprintf("a %T", v)
}
