package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/nsbox/nsbox/policies"
	"github.com/nsbox/nsbox/rootfs-builder/rootfs"
	"github.com/nsbox/nsbox/sandbox/roots"
)

// rootPackages is what `policy show --packages` reports: the top-level
// modules the policy's root installs (outside the standard library),
// split by whether the policy's import allowlist allows them.
type rootPackages struct {
	Policy     string   `json:"policy"`
	Root       string   `json:"root"`       // python.root as the policy names it
	Generation string   `json:"generation"` // the generation read
	Packages   []string `json:"packages"`   // the root's lock, "name==version"
	Allowed    []string `json:"allowed"`    // installed and allowed
	NotAllowed []string `json:"not_allowed"`
}

// readRootPackages holds p's root, reads its manifest and compares its
// modules with p's allowlist. Private modules ("_cffi_backend") are
// listed only when the policy names them: a program imports them through
// their packages. Only the manifest is read: a root another nsbox built
// (whose runner this one would not start) still answers.
func readRootPackages(p *policies.Policy) (*rootPackages, error) {
	dir := roots.Path(p.Python.Root)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) && roots.IsBuiltin(p.Python.Root) {
		return nil, &roots.NotBuiltError{Name: p.Python.Root, Dir: dir}
	}
	held, err := rootfs.Hold(dir)
	if err != nil {
		return nil, err
	}
	defer held.Close()
	m, err := rootfs.Load(held.Dir)
	if err != nil {
		return nil, err
	}
	rp := &rootPackages{Policy: p.Name, Root: p.Python.Root, Generation: held.Dir,
		Packages: []string{}, Allowed: []string{}, NotAllowed: []string{}}
	if m.Lock != nil {
		rp.Packages = append(rp.Packages, m.Lock.Packages...)
	}
	all := p.Allowlist.AllowsEverything()
	for _, mod := range m.Modules() {
		switch {
		case all || slices.Contains(p.Allowlist.Imports, mod):
			rp.Allowed = append(rp.Allowed, mod)
		case !strings.HasPrefix(mod, "_"):
			rp.NotAllowed = append(rp.NotAllowed, mod)
		}
	}
	return rp, nil
}

func (rp *rootPackages) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rp)
	}
	list := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	_, err := fmt.Fprintf(w, "policy %s on root %s (%s): %d locked packages\n"+
		"importable (installed and allowed): %s\n"+
		"installed but not allowed:          %s\n",
		rp.Policy, rp.Root, rp.Generation, len(rp.Packages), list(rp.Allowed), list(rp.NotAllowed))
	return err
}
