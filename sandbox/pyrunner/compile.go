package pyrunner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
)

// compiledDir is where a root keeps the compiled runner.
const compiledDir = "/usr/lib/nsbox"

// SourceName is the file name the compiled runner's code carries (its
// frames never show in the program's tracebacks). No file of that name
// exists in a root: only the compiled runner ships.
const SourceName = compiledDir + "/runner.py"

// CompiledPath is where a root keeps the runner compiled for its own
// interpreter (written by Compile when the root is built, and listed in
// the root's manifest). The name carries a hash of Source, so a root built
// with another runner lacks this file: such a root must be rebuilt.
func CompiledPath() string {
	sum := sha256.Sum256([]byte(Source))
	return compiledDir + "/runner-" + hex.EncodeToString(sum[:8]) + ".pyc"
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
