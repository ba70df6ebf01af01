package policies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// suggest returns a hint for the unknown key k: a known key of the same
// table it is probably a misspelling of, or the table it belongs in.
func suggest(k toml.Key, known []string) string {
	last := k[len(k)-1]
	for _, c := range known {
		if near(last, c) {
			return fmt.Sprintf(" (did you mean %q?)", c)
		}
	}
	for _, sec := range sections() {
		for _, c := range leaves(sec) {
			if near(last, c) && sec != k[0] {
				return fmt.Sprintf(" (%s belongs in [%s])", c, sec)
			}
		}
	}
	if len(k) > 1 {
		for _, c := range topNames() {
			if near(last, c) && !slices.Contains(sections(), c) {
				return fmt.Sprintf(" (%s belongs at the top level, above the first [table])", c)
			}
		}
	}
	return ""
}

// near reports whether a is probably a misspelling of b.
// A short name is near another only one edit away ("tmeout"), a longer
// one two ("landlok", "time_out"), or when it starts the other ("mem" for
// "memory"); "foo" is near nothing, rather than two edits from "root".
func near(a, b string) bool {
	if strings.EqualFold(a, b) || len(a) >= 3 && strings.HasPrefix(b, a) {
		return true
	}
	most := 1
	if len(a) >= 6 {
		most = 2
	}
	return editDistance(a, b) <= most
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
