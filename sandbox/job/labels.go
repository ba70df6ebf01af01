package job

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nsbox/nsbox/sandbox/audit"
)

// labelKey reports whether k is what a label accepts as a key: 1-64
// characters of A-Z a-z 0-9 _ . -. Checked by hand: the equivalent regexp,
// compiled at start-up, was the largest package initialiser of every run
// (the {1,64} unrolls into hundreds of allocations).
func labelKey(k string) bool {
	if len(k) == 0 || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// labelProblem returns what is wrong with the label k=v, or "" when the
// audit log can store it.
func labelProblem(k, v string) string {
	switch {
	case !labelKey(k):
		return "the key must be 1-64 characters of A-Z a-z 0-9 _ . -"
	case len(v) > audit.MaxLabelValueBytes:
		return fmt.Sprintf("the value is longer than %d bytes", audit.MaxLabelValueBytes)
	case !utf8.ValidString(v):
		return "the value is not valid UTF-8"
	}
	return ""
}

// ParseLabels reads repeated --label key=value flags. Whatever the audit
// log could not store is refused here, as bad input, so that the refusal
// is still recorded.
func ParseLabels(flags []string) (map[string]string, error) {
	if len(flags) > audit.MaxLabels {
		return nil, fmt.Errorf("--label given %d times: at most %d labels per run", len(flags), audit.MaxLabels)
	}
	labels := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("--label %q: want key=value", f)
		}
		if p := labelProblem(k, v); p != "" {
			if labelKey(k) {
				return nil, fmt.Errorf("--label %q: %s", k, p)
			}
			return nil, fmt.Errorf("--label %q: %s", f, p)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("--label %q: key given twice", k)
		}
		labels[k] = v
	}
	return labels, nil
}

// CheckLabels refuses labels the audit log could not store (the rules of
// ParseLabels), for a door that gets them as a map.
func CheckLabels(labels map[string]string) error {
	if len(labels) > audit.MaxLabels {
		return fmt.Errorf("%d labels: at most %d labels per run", len(labels), audit.MaxLabels)
	}
	for k, v := range labels {
		if p := labelProblem(k, v); p != "" {
			return fmt.Errorf("label %q: %s", k, p)
		}
	}
	return nil
}
