package pyrunner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"

	"github.com/nsbox/nsbox/sandbox/pyrunner/runnerlibs"
)

// compiledDir is where a root keeps the compiled runner.
const compiledDir = "/usr/lib/nsbox"

// SourceName is the file name the compiled runner's code carries (its
// frames never show in the program's tracebacks). No file of that name
// exists in a root: only the compiled runner ships.
const SourceName = compiledDir + "/runner.py"

// CompiledPath is where a root keeps the runner compiled for its own
// interpreter (written by Compile when the root is built, and listed in
// the root's manifest). The name carries a hash of Source and of the
// runner's library (LibDir), so a root built with another runner, or
// with another library or none, lacks this file: such a root must be
// rebuilt.
func CompiledPath() string {
	sum := sha256.Sum256([]byte(Source + "\x00" + libDigest()))
	return compiledDir + "/runner-" + hex.EncodeToString(sum[:8]) + ".pyc"
}

// LibDir is where a root keeps the runner's own library (RestrictedPython,
// package runnerlibs), compiled: a directory of its own, never on the
// program's sys.path; the runner imports it from there under python.mode
// "restricted" only. Its name carries the pinned wheel's digest.
func LibDir() string {
	return compiledDir + "/lib-" + libDigest()[:16]
}

// libDigest is the pinned wheel's sha256; a vendored wheel that does not
// match its lock is a broken build of nsbox, not a run-time condition.
func libDigest() string {
	d, err := runnerlibs.Digest()
	if err != nil {
		panic(err)
	}
	return d
}

// InstallLib writes the runner's library into a root: extracted under the
// host path dst (which must not exist; the root's LibDir()), then compiled
// by python, the root's interpreter, as unchecked-hash .pyc files whose
// code names LibDir() (the root is read-only: nothing is compiled at run
// time).
func InstallLib(ctx context.Context, python, dst string) error {
	if err := runnerlibs.Extract(dst); err != nil {
		return fmt.Errorf("install runner library into %s: %w", dst, err)
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-m", "compileall", "-q", "-f",
		"--invalidation-mode", "unchecked-hash", "-s", dst, "-p", LibDir(), dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile runner library %s with %s: %w\n%s", dst, python, err, out)
	}
	return nil
}

// compileScript compiles argv[1] to argv[2] as an unchecked-hash .pyc whose
// code names argv[3] as its file: the interpreter loads it without looking
// for the source.
const compileScript = "import py_compile, sys\n" +
	"py_compile.compile(sys.argv[1], cfile=sys.argv[2], dfile=sys.argv[3], doraise=True,\n" +
	"    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"

// Compile writes Source compiled by python, the interpreter that will run
// it, to the host path dst, whose directory must exist. The source goes to
// a temporary file outside dst's directory and is removed.
func Compile(ctx context.Context, python, dst string) error {
	src, err := os.CreateTemp("", "nsbox-runner-*.py")
	if err != nil {
		return fmt.Errorf("compile runner: create source file: %w", err)
	}
	defer os.Remove(src.Name())
	if _, err := src.WriteString(Source); err != nil {
		src.Close()
		return fmt.Errorf("compile runner: write %s: %w", src.Name(), err)
	}
	if err := src.Close(); err != nil {
		return fmt.Errorf("compile runner: close %s: %w", src.Name(), err)
	}
	cmd := exec.CommandContext(ctx, python, "-I", "-c", compileScript, src.Name(), dst, SourceName)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile runner with %s into %s: %w\n%s", python, dst, err, out)
	}
	return nil
}
