package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoHTTPInNsbox: the nsbox binary does not link net/http (the service
// lives in nsbox-serve): its package initialisers and size would be paid
// by every cold run.
func TestNoHTTPInNsbox(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", "-tags", "netgo,osusergo,sqlite_omit_load_extension,urfave_cli_no_docs", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, p := range deps {
		if p == "net/http" || strings.HasPrefix(p, "github.com/nsbox/nsbox/service") && p != "github.com/nsbox/nsbox/service/launch" {
			t.Errorf("nsbox depends on %s", p)
		}
	}
}
