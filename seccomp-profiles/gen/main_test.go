package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// TestGoldens regenerates every golden of this architecture in memory and
// fails when a checked-in file is missing, differs or is left over: the
// binary embeds those files and loads them instead of compiling, so they
// must be exactly what the profiles and libseccomp give now.
func TestGoldens(t *testing.T) {
	bad, err := problems("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bad {
		t.Errorf("%s: run `go generate ./seccomp-profiles` (or `make generate`) on %s and commit the result", p, runtime.GOARCH)
	}
}

// problems compares the goldens in dir with what generate gives now.
func problems(dir string) ([]string, error) {
	files, stale, err := generate(dir)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	maj, min, mic := libseccomp.GetLibraryVersion()
	var bad []string
	for _, name := range sortedKeys(files) {
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("golden %s: %v", name, err))
		case !bytes.Equal(got, files[name]):
			bad = append(bad, fmt.Sprintf("golden %s is stale: %d bytes checked in, %d from the profiles with libseccomp %d.%d.%d now",
				name, len(got), len(files[name]), maj, min, mic))
		}
	}
	for _, name := range stale {
		bad = append(bad, fmt.Sprintf("golden %s belongs to no built-in profile", name))
	}
	return bad, nil
}

// TestGoldensCanFail checks that TestGoldens sees each kind of problem, on
// a copy written by run: a changed filter, a changed table, a missing
// golden and a left-over one; and that run repairs them all.
func TestGoldensCanFail(t *testing.T) {
	tmp := t.TempDir()
	if err := run(tmp); err != nil {
		t.Fatalf("run: %v", err)
	}
	if bad, err := problems(tmp); err != nil || len(bad) != 0 {
		t.Fatalf("right after run: %v, %v; want no problem", bad, err)
	}
	arch := runtime.GOARCH
	path := func(name string) string { return filepath.Join(tmp, name) }
	raw, err := os.ReadFile(path("default." + arch + ".bpf"))
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1
	table, err := os.ReadFile(path("golden_" + arch + ".go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.WriteFile(path("default."+arch+".bpf"), raw, 0o644),
		os.WriteFile(path("golden_"+arch+".go"), bytes.Replace(table, []byte(`profileSHA256: "`), []byte(`profileSHA256: "0`), 1), 0o644),
		os.Remove(path("strict." + arch + ".bpf")),
		os.WriteFile(path("gone."+arch+".bpf"), []byte{0}, 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	bad, err := problems(tmp)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(bad, "\n")
	for _, want := range []string{"default." + arch + ".bpf is stale", "golden_" + arch + ".go is stale", "strict." + arch + ".bpf: open", "gone." + arch + ".bpf belongs to no"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}
	if err := run(tmp); err != nil {
		t.Fatalf("run: %v", err)
	}
	if bad, err := problems(tmp); err != nil || len(bad) != 0 {
		t.Errorf("after run: %v, %v; want no problem", bad, err)
	}
}

// TestOtherExcludesEveryTable checks that golden_other.go applies only
// where no golden_GOARCH.go does: another architecture's table found in
// the directory joins this one's in its build constraint.
func TestOtherExcludesEveryTable(t *testing.T) {
	tmp := t.TempDir()
	for _, name := range []string{"golden_riscv64.go", "golden_other.go", "golden_x_test.go"} {
		if err := os.WriteFile(filepath.Join(tmp, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, _, err := generate(tmp)
	if err != nil {
		t.Fatal(err)
	}
	want := "//go:build !" + runtime.GOARCH + " && !riscv64\n"
	if runtime.GOARCH > "riscv64" {
		want = "//go:build !riscv64 && !" + runtime.GOARCH + "\n"
	}
	if other := files["golden_other.go"]; !bytes.Contains(other, []byte(want)) {
		t.Errorf("golden_other.go lacks %q:\n%s", want, other)
	}
}
