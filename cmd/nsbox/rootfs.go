package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/rootfs-builder/build"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/pyrunner"
	"github.com/nsbox/nsbox/sandbox/roots"
)

// exitRootfsFailed is the exit status of a failed build, and of a verify
// that found a difference or could not read the root.
const exitRootfsFailed = 1

func rootfsCommand() *cli.Command {
	return &cli.Command{
		Name:            "rootfs",
		Usage:           "build and verify the read-only root filesystems that runs use",
		HideHelpCommand: true,
		Subcommands:     []*cli.Command{rootfsBuildCommand(), rootfsLockCommand(), rootfsVerifyCommand(), rootfsSweepCommand(), rootfsRemoveCommand(), rootfsRunnerPathCommand()},
	}
}

// rootfsRunnerPathCommand prints where a root built by this nsbox keeps
// its compiled Python runner; `make datasci` (`make web`) rebuilds a root that lacks it.
func rootfsRunnerPathCommand() *cli.Command {
	return &cli.Command{
		Name:   "runner-path",
		Usage:  "print the path, inside a root, of this nsbox's compiled Python runner",
		Hidden: true,
		Action: func(*cli.Context) error {
			fmt.Println(pyrunner.CompiledPath())
			return nil
		},
	}
}

func rootfsBuildCommand() *cli.Command {
	return &cli.Command{
		Name:  "build",
		Usage: "build a root: an interpreter, its standard library, a venv with the locked packages, their libraries",
		Description: "Builds into OUT.tmp-XXXX next to --out, which becomes a new generation OUT.gen-ID; --out, a symlink,\n" +
			"is then switched to it in one rename. Runs in progress keep the generation they started on; a generation\n" +
			"no run holds any more is removed by the next build or `nsbox rootfs sweep`. A failed build leaves --out\n" +
			"as it was. --lock is a pip requirements file in which every entry is name==version with --hash=sha256:...\n" +
			"(pip-compile --generate-hashes); packages are installed from wheels only, with the pip of --python or of\n" +
			"python3 on PATH, reusing pip's cache. Without --lock the root holds the standard library only and the\n" +
			"build needs no network. Must run as root.\n" +
			"\n" +
			"--from PARENT (a built-in root's name or a root's path) builds a layered root: every file of PARENT's\n" +
			"current generation hard-linked (--out must be on its file system), plus --lock's packages, installed\n" +
			"apart and moved in; a package PARENT has at another version, or a path it has already, is refused, one\n" +
			"at the same version skipped. The interpreter is PARENT's (--python may be left out). The manifest covers\n" +
			"the whole root and records PARENT; `nsbox rootfs remove PARENT` is refused while the root exists.\n" +
			"--root-file FILE declares the same in TOML: from = \"datasci\" and lock = \"extra.lock\" (relative to FILE).\n" +
			"\n" +
			"On a terminal, one line per step with its time, files and bytes. With --json, or when standard output\n" +
			"is not a terminal, one JSON object per line: {\"step\":NAME}, {\"files\":N,\"bytes\":B}, and at the end\n" +
			"{\"done\":true,\"python\":PATH,\"python_version\":V,\"files\":N,\"bytes\":B,\"packages\":[...],\"generation\":DIR,\n" +
			"\"kept\":[DIR...],\"elapsed_ms\":MS} (kept: older generations that runs may still use)\n" +
			"or {\"error\":MESSAGE}. Exit status: 0 built, 1 failed (the message names the file, line or package).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "python", Usage: "host interpreter, absolute path (e.g. /usr/bin/python3.11)"},
			&cli.StringFlag{Name: "out", Usage: "root to create or replace (a symlink to its current generation)"},
			&cli.StringFlag{Name: "lock", Usage: "hash-pinned requirements lock (default: standard library only)"},
			&cli.StringFlag{Name: "from", Usage: "parent root, a built-in name or a path: build a layered root, the parent plus --lock's packages"},
			&cli.StringFlag{Name: "root-file", Usage: "TOML file declaring a layered root: from = PARENT, lock = LOCK (paths relative to the file)"},
			&cli.BoolFlag{Name: "json", Usage: "print progress and the result as JSON lines"},
			&cli.StringFlag{Name: "pip-cache", Usage: "pip's cache directory (default: pip's own)"},
			&cli.StringFlag{Name: "pip", Usage: "interpreter whose pip installs the packages (default: --python, then python3 on PATH)"},
		},
		Action: rootfsBuildAction,
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit("nsbox: rootfs build: "+err.Error(), exitRootfsFailed)
		},
	}
}

func rootfsBuildAction(c *cli.Context) error {
	w := c.App.Writer
	structured := c.Bool("json") || !isTerminal(w)
	fail := func(err error) error { return rootfsBuildFailed(c, structured, err) }
	switch {
	case c.NArg() > 0:
		return fail(fmt.Errorf("build takes no arguments, got %q", c.Args().Slice()))
	case c.String("python") == "" && c.String("from") == "" && c.String("root-file") == "":
		return fail(fmt.Errorf("--python is required (or --from a parent root)"))
	case c.String("out") == "":
		return fail(fmt.Errorf("--out is required"))
	}
	rep := build.NewTTYReporter(w)
	if structured {
		rep = build.NewJSONReporter(w)
	}
	// SIGINT, SIGTERM and SIGHUP cancel the build, which then removes its
	// temporary directory instead of leaving it behind.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	var from, fromName string
	lock := c.String("lock")
	if f := c.String("from"); f != "" {
		from = roots.Path(f)
		if roots.IsBuiltin(f) {
			fromName = f
		}
	}
	if rf := c.String("root-file"); rf != "" {
		if c.IsSet("from") || c.IsSet("lock") {
			return fail(errRootFileAndFlags)
		}
		var err error
		if from, fromName, lock, err = readRootFile(rf); err != nil {
			return fail(err)
		}
	}
	_, err := build.Build(ctx, build.Options{
		From:        from,
		FromName:    fromName,
		Python:      c.String("python"),
		Lock:        lock,
		Out:         c.String("out"),
		Version:     version,
		Progress:    rep,
		PipCacheDir: c.String("pip-cache"),
		Pip:         c.String("pip"),
	})
	if err != nil {
		return fail(err)
	}
	return nil
}

// rootfsBuildFailed reports err as one {"error":...} line in structured
// mode (and, unless --json was asked for, on stderr too, for logs), or on
// stderr after the unfinished progress line, and exits 1.
func rootfsBuildFailed(c *cli.Context, structured bool, err error) error {
	if structured {
		if werr := json.NewEncoder(c.App.Writer).Encode(map[string]string{"error": err.Error()}); werr != nil {
			return cli.Exit(fmt.Sprintf("nsbox: rootfs build: %v (and writing it failed: %v)", err, werr), exitRootfsFailed)
		}
		if c.Bool("json") {
			return cli.Exit("", exitRootfsFailed)
		}
	} else {
		fmt.Fprintln(c.App.Writer)
	}
	fmt.Fprintf(c.App.ErrWriter, "nsbox: rootfs build: %v\n", err)
	return cli.Exit("", exitRootfsFailed)
}

func rootfsVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "re-hash every file of a root and list what is missing, modified or extra",
		ArgsUsage: "DIR",
		Description: "Compares every path under DIR with DIR/.nsbox/manifest.json: type, mode, size, sha256 and link\n" +
			"target, plus the metadata itself (the header's manifest digest, the lock file). DIR's current\n" +
			"generation is checked, and held meanwhile, so a rebuild does not remove it half-way. Prints one line\n" +
			"per difference (\"missing PATH\", \"modified PATH\", \"extra PATH\", paths inside the root) and a summary.\n" +
			"--json prints one object: {\"root\":DIR,\"generation\":GEN,\"ok\":BOOL,\"missing\":[...],\"modified\":[...],\n" +
			"\"extra\":[...]}, GEN being the directory checked, with \"error\":MESSAGE when the root could not be\n" +
			"verified at all.\n" +
			"\n" +
			"Exit status: 0 when the root matches its manifest, 1 on any difference or when it cannot be read.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
		},
		Action: rootfsVerifyAction,
	}
}

// verifyResult is verify's --json object.
type verifyResult struct {
	Root       string `json:"root"`
	Generation string `json:"generation,omitempty"`
	OK         bool   `json:"ok"`
	rootfs.Report
	Error string `json:"error,omitempty"`
}

func rootfsVerifyAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("verify takes one root directory, got %q", c.Args().Slice())
	}
	dir := c.Args().First()
	rep := rootfs.Report{Missing: []string{}, Modified: []string{}, Extra: []string{}}
	held, err := rootfs.Hold(dir)
	var gen string
	if err == nil {
		gen = held.Dir
		rep, err = rootfs.Verify(gen)
		if cerr := held.Close(); err == nil {
			err = cerr
		}
	}
	res := verifyResult{Root: dir, Generation: gen, OK: err == nil && rep.OK(), Report: rep}
	if err != nil {
		res.Error = err.Error()
	}
	var werr error
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		werr = enc.Encode(res)
	} else {
		werr = res.writeText(c.App.Writer)
	}
	if werr != nil {
		return fmt.Errorf("write the report: %w", werr)
	}
	if !res.OK {
		return cli.Exit("", exitRootfsFailed)
	}
	return nil
}

func (r verifyResult) writeText(w io.Writer) error {
	if r.Error != "" {
		_, err := fmt.Fprintf(w, "%s: cannot verify: %s\n", r.Root, r.Error)
		return err
	}
	for _, g := range []struct {
		what  string
		paths []string
	}{{"missing", r.Missing}, {"modified", r.Modified}, {"extra", r.Extra}} {
		for _, p := range g.paths {
			fmt.Fprintf(w, "%-9s %s\n", g.what, p)
		}
	}
	if r.OK {
		_, err := fmt.Fprintf(w, "%s: matches its manifest\n", r.Root)
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %d missing, %d modified, %d extra\n", r.Root, len(r.Missing), len(r.Modified), len(r.Extra))
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func rootfsSweepCommand() *cli.Command {
	return &cli.Command{
		Name:      "sweep",
		Usage:     "remove the generations of a root that no run uses any more",
		ArgsUsage: "DIR",
		Description: "Removes the generations of the root DIR (DIR.gen-ID) that are not current and that no run holds, and\n" +
			"what builds that died left (DIR.tmp-*), as every `nsbox rootfs build` of DIR does. A generation a run\n" +
			"still uses is kept, and so, for a day after it was renamed aside, is a root an older nsbox built in\n" +
			"place (its runs hold no lock). Waits for a build of DIR in progress. Prints one line per generation\n" +
			"kept. Must run as root.\n" +
			"\n" +
			"Exit status: 0 swept, 1 failed.",
		Action: rootfsSweepAction,
	}
}

func rootfsSweepAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit(fmt.Sprintf("nsbox: rootfs sweep takes one root, got %q", c.Args().Slice()), exitRootfsFailed)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	kept, err := build.Sweep(ctx, c.Args().First())
	for _, k := range kept {
		fmt.Fprintf(c.App.Writer, "kept %s: runs may still use it\n", k)
	}
	if err != nil {
		return cli.Exit("nsbox: rootfs sweep: "+err.Error(), exitRootfsFailed)
	}
	return nil
}

func rootfsRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a root and all its generations",
		ArgsUsage: "ROOT",
		Description: "Removes the root ROOT (a built-in name, resolved in the roots directory, or a path): its symlink,\n" +
			"every generation with its lock, and the build lock. Holds the build lock meanwhile. Refuses, removing\n" +
			"nothing, while a run holds any generation of ROOT, and while a layered root in the roots directory or\n" +
			"in ROOT's own directory names ROOT as its parent (remove that one first). Must run as root.\n" +
			"\n" +
			"Exit status: 0 removed, 1 refused or failed.",
		Action: rootfsRemoveAction,
	}
}

func rootfsRemoveAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit(fmt.Sprintf("nsbox: rootfs remove takes one root, got %q", c.Args().Slice()), exitRootfsFailed)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	dir := roots.Path(c.Args().First())
	if err := build.Remove(ctx, dir, []string{roots.Dir()}); err != nil {
		return cli.Exit("nsbox: rootfs remove: "+err.Error(), exitRootfsFailed)
	}
	fmt.Fprintf(c.App.Writer, "removed %s\n", dir)
	return nil
}
