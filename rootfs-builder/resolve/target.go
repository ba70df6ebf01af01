package resolve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Target is the interpreter and platform a lock is made for, as the
// interpreter reports them.
type Target struct {
	Python  string `json:"python"`         // the interpreter asked, e.g. /usr/bin/python3.11
	Version string `json:"python_version"` // "3.11.2"
	Short   string `json:"-"`              // "3.11"
	ABI     string `json:"abi"`            // "cp311"
	Glibc   string `json:"glibc"`          // "2.36"
	Machine string `json:"machine"`        // "x86_64"
	// Platform is uv's --python-platform: the newest manylinux uv knows
	// that the interpreter's glibc runs, e.g. "x86_64-manylinux_2_36".
	Platform string `json:"platform"`
}

// String describes the target in messages: "CPython 3.11 manylinux_2_36 x86_64".
func (t Target) String() string {
	_, ml, _ := strings.Cut(t.Platform, "-")
	return "CPython " + t.Short + " " + ml + " " + t.Machine
}

// targetScript prints what Target needs. -I -S: no environment, no site.
const targetScript = `import json, platform, sys
print(json.dumps({
    "impl": sys.implementation.name,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "short": "%d.%d" % sys.version_info[:2],
    "nodot": "%d%d" % sys.version_info[:2],
    "abiflags": getattr(sys, "abiflags", ""),
    "libc": list(platform.libc_ver()),
    "machine": platform.machine(),
}))`

// manylinuxMinors are the glibc 2.x minors uv accepts in
// --python-platform ARCH-manylinux_2_N.
var manylinuxMinors = []int{17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40}

// InspectTarget asks the interpreter for its version, ABI, C library and
// machine. Only CPython without ABI flags (not free-threaded, not debug)
// on glibc, x86_64 or aarch64, is a target nsbox's roots support.
func InspectTarget(ctx context.Context, python string) (Target, error) {
	cmd := command(ctx, python, "-I", "-S", "-c", targetScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Target{}, fmt.Errorf("inspect interpreter %s: %w: %s", python, err, strings.TrimSpace(stderr.String()))
	}
	var p struct {
		Impl, Version, Short, Nodot, Abiflags, Machine string
		Libc                                           []string
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return Target{}, fmt.Errorf("inspect interpreter %s: %w (output %q)", python, err, out)
	}
	t := Target{Python: python, Version: p.Version, Short: p.Short, ABI: "cp" + p.Nodot, Machine: p.Machine}
	switch {
	case p.Impl != "cpython":
		return t, fmt.Errorf("interpreter %s is %s, only CPython is supported", python, p.Impl)
	case p.Abiflags != "":
		return t, fmt.Errorf("interpreter %s has ABI flags %q (free-threaded or debug build): only the default CPython ABI is supported", python, p.Abiflags)
	case len(p.Libc) != 2 || p.Libc[0] != "glibc":
		return t, fmt.Errorf("interpreter %s: C library %q, only glibc (manylinux) is supported", python, p.Libc)
	case p.Machine != "x86_64" && p.Machine != "aarch64":
		return t, fmt.Errorf("interpreter %s runs on %s, only x86_64 and aarch64 are supported", python, p.Machine)
	}
	t.Glibc = p.Libc[1]
	major, minorText, _ := strings.Cut(t.Glibc, ".")
	minor, err := strconv.Atoi(minorText)
	if major != "2" || err != nil {
		return t, fmt.Errorf("interpreter %s: glibc version %q not understood", python, t.Glibc)
	}
	best := 0
	for _, m := range manylinuxMinors {
		if m <= minor {
			best = m
		}
	}
	if best == 0 {
		return t, fmt.Errorf("interpreter %s: glibc %s is older than manylinux2014 (glibc 2.17)", python, t.Glibc)
	}
	t.Platform = fmt.Sprintf("%s-manylinux_2_%d", t.Machine, best)
	return t, nil
}
