package resolve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/nsbox/nsbox/rootfs-builder/build"
)

// ToolsVenv is where `make tools-venv` installs uv in a checkout, relative
// to the checkout: FindUV looks for it beside the directory of the running
// binary (bin/nsbox -> .venv-tools/bin/uv).
const ToolsVenv = ".venv-tools"

// FindUV returns the uv to run: explicit when not empty (it must exist),
// else uv on PATH, else ToolsVenv/bin/uv in the parent of the directory
// that holds self (the running binary; "" skips this).
func FindUV(explicit, self string) (string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("uv %s: %w", explicit, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("uv"); err == nil {
		return p, nil
	}
	tried := "uv on PATH"
	if self != "" {
		p := filepath.Join(filepath.Dir(filepath.Dir(self)), ToolsVenv, "bin", "uv")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried += " and " + p
	}
	return "", fmt.Errorf("no uv (looked for %s): install uv (`pip install uv`, or `make tools-venv` in a checkout) or name it with --uv", tried)
}

// command prepares a program the resolver runs; it dies with nsbox.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// uvEnvKeep are the UV_* variables passed to uv: where and how to
// download (indexes, their credentials, TLS, the cache). Others
// (UV_CONSTRAINT, UV_OVERRIDE, UV_PRERELEASE, UV_RESOLUTION,
// UV_INDEX_STRATEGY, UV_NO_BINARY, UV_CONFIG_FILE, ...) would change what
// is resolved and are dropped, as are PYTHON* and the variables that name
// an environment (VIRTUAL_ENV, CONDA_PREFIX).
var uvEnvKeep = []string{
	"UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS",
	"UV_CACHE_DIR", "UV_NO_CACHE", "UV_OFFLINE", "UV_HTTP_TIMEOUT", "UV_HTTP_RETRIES",
	"UV_CONCURRENT_DOWNLOADS", "UV_NATIVE_TLS", "UV_SYSTEM_CERTS", "UV_KEYRING_PROVIDER",
	"UV_INSECURE_HOST",
}

// uvEnv filters env for uv (see uvEnvKeep).
func uvEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "UV_INDEX_") && (strings.HasSuffix(k, "_USERNAME") || strings.HasSuffix(k, "_PASSWORD")):
		case strings.HasPrefix(k, "UV_") && !slices.Contains(uvEnvKeep, k):
			continue
		case strings.HasPrefix(k, "PYTHON"), k == "VIRTUAL_ENV", k == "CONDA_PREFIX", k == "NO_COLOR", k == "FORCE_COLOR":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "UV_PYTHON_DOWNLOADS=never", "UV_NO_PROGRESS=1", "NO_COLOR=1")
}

var (
	// noWheelRe: uv's hint when a package has only a source distribution.
	noWheelRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("Wheels are required for `([A-Za-z0-9._-]+)` because building from source is disabled")
	})
	noUsableRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Because (?:only )?([A-Za-z0-9._-]+)[=<>!~]=?\S* has no usable wheels`)
	})
	// otherWheelsRe: the package has wheels, for other platforms or
	// Pythons.
	otherWheelsRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Because ([A-Za-z0-9._-]+)==\S+ has no wheels with a matching (?:platform|Python implementation|Python ABI|Python) tag`)
	})
	notFoundRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Because ([A-Za-z0-9._-]+) was not found in the (package registry|provided package locations|cache)`)
	})
	unsatRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`you require ([A-Za-z0-9._-]+)[<>=!~]`)
	})
	causeRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)(error: .*)$`) })
)

// uvError turns a failed `uv pip compile` into an error naming the
// package at fault and, when it is one of the requirements, the file and
// line that asks for it; uv's own explanation follows.
func uvError(reqFile string, reqs []Requirement, t Target, offline bool, out []byte, runErr error) error {
	detail := strings.TrimSpace(string(out))
	if m := causeRe().FindStringSubmatch(detail); m != nil {
		detail = m[1]
	}
	detail = lastLines([]byte(detail), 30)
	named := func(pkg, reason string) error {
		lerr := &build.LockError{File: reqFile, Package: pkg, Reason: reason}
		for _, r := range reqs {
			if normalize(r.Name) == normalize(pkg) {
				lerr.Line, lerr.Package = r.Line, r.Name
				break
			}
		}
		if lerr.Line == 0 {
			lerr.Reason = pkg + " (a dependency, not listed in the file): " + reason
		}
		return fmt.Errorf("%w\nuv:\n%s", lerr, detail)
	}
	s := string(out)
	if m := otherWheelsRe().FindStringSubmatch(s); m != nil {
		return named(m[1], fmt.Sprintf("no wheel for %s (its wheels are for other platforms or Python versions); nsbox installs wheels only", t))
	}
	if m := noWheelRe().FindStringSubmatch(s); m != nil {
		return named(m[1], fmt.Sprintf("no wheel for CPython %s manylinux %s (only a source distribution); nsbox installs wheels only", t.Short, t.Machine))
	}
	if m := noUsableRe().FindStringSubmatch(s); m != nil {
		return named(m[1], fmt.Sprintf("no wheel for %s; nsbox installs wheels only", t))
	}
	if m := notFoundRe().FindStringSubmatch(s); m != nil {
		switch m[2] {
		case "cache":
			return named(m[1], "not in uv's cache, and --offline forbids downloading it")
		case "provided package locations":
			return named(m[1], "not found in the --find-links directories (and the index is off)")
		}
		if offline {
			return named(m[1], "not found (offline)")
		}
		return named(m[1], "not found on the package index: check the name")
	}
	if m := unsatRe().FindStringSubmatch(s); m != nil && strings.Contains(s, "unsatisfiable") {
		return named(m[1], "no version satisfies the requirements")
	}
	var ee *exec.ExitError
	if !errors.As(runErr, &ee) {
		return fmt.Errorf("resolve %s: run uv: %w", reqFile, runErr)
	}
	return fmt.Errorf("resolve %s: uv pip compile failed (%v):\n%s", reqFile, runErr, detail)
}

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
