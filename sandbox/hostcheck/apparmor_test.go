package hostcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// installProfile is the fix the hints must give word for word, as
// docs/doctor.md and deploy/apparmor/nsbox give it.
const installProfile = "`sudo install -m 644 deploy/apparmor/nsbox /etc/apparmor.d/nsbox && sudo apparmor_parser -r /etc/apparmor.d/nsbox`"

func TestAppArmorHints(t *testing.T) {
	for name, hint := range map[string]string{"userNamespaceHint": userNamespaceHint, "appArmorHint": appArmorHint} {
		if !strings.Contains(hint, installProfile) {
			t.Errorf("%s does not give the install commands %s:\n%s", name, installProfile, hint)
		}
		if strings.ContainsAny(hint, "\n\r") {
			t.Errorf("%s is not one line:\n%s", name, hint)
		}
	}
}

// TestAppArmorProfile checks that the profile the hints name exists in the
// source tree, allows user namespaces and attaches to nsbox's three
// binaries in every directory the hints say it covers.
func TestAppArmorProfile(t *testing.T) {
	path := filepath.Join("..", "..", filepath.FromSlash(appArmorProfile))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the profile the hints name: %v", err)
	}
	text := string(b)
	m := regexp.MustCompile(`(?m)^profile nsbox (\S+) flags=\(unconfined\) \{$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no line `profile nsbox ATTACHMENT flags=(unconfined) {`", path)
	}
	if !regexp.MustCompile(`(?m)^\s+userns,$`).MatchString(text) {
		t.Errorf("%s: no `userns,` rule", path)
	}
	attached := expandBraces(m[1])
	for _, dir := range []string{"/usr/bin", "/usr/local/bin", "/opt/nsbox/bin"} {
		if !strings.Contains(appArmorProfileFix, dir) {
			t.Errorf("the hint does not name %s", dir)
		}
		// nsbox, the stand-alone init (supervisor.InitBinary) and the
		// service (nsbox serve execs it from beside nsbox).
		for _, bin := range []string{"nsbox", "nsbox-init", "nsbox-serve"} {
			if p := dir + "/" + bin; !slices.Contains(attached, p) {
				t.Errorf("%s does not attach to %s (it attaches to %v)", path, p, attached)
			}
		}
	}
}

// expandBraces expands AppArmor's {a,b} alternations (not nested).
func expandBraces(glob string) []string {
	open := strings.IndexByte(glob, '{')
	if open < 0 {
		return []string{glob}
	}
	end := strings.IndexByte(glob[open:], '}') + open
	var out []string
	for _, alt := range strings.Split(glob[open+1:end], ",") {
		out = append(out, expandBraces(glob[:open]+alt+glob[end+1:])...)
	}
	return out
}
