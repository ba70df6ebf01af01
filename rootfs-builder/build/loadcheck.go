package build

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
)

// checkLoadable asks the root's own dynamic loader, chrooted into the
// root, to resolve every ELF object there (`ld.so --list FILE`), and fails
// naming any library it cannot find. elfdeps computes the closure as ld.so
// would on the host; this proves it inside the root, where there is no
// ld.so.cache and no ld.so.conf, so a library found on the host only
// through them (e.g. under /usr/local/lib) is caught here rather than at
// run time. In list mode the loader maps the objects and prints them; it
// runs none of their code.
func (b *builder) checkLoadable() error {
	loader, _, err := b.interpreterLibs()
	if err != nil {
		return err
	}
	if loader == "" {
		return nil // a static interpreter loads nothing
	}
	all, err := findELFs(b.root)
	if err != nil {
		return err
	}
	// A wheel's vendored library is checked with the modules that load it
	// (their RPATH finds its dependencies: venvClosure), not alone.
	var elfs []string
	for _, p := range all {
		if !isVendored(p) {
			elfs = append(elfs, p)
		}
	}
	work := make(chan int)
	errs := make([]error, len(elfs))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				errs[i] = b.listInRoot(loader, elfs[i])
			}
		})
	}
	for i := range elfs {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// listInRoot runs `LOADER --list P` chrooted into the root.
func (b *builder) listInRoot(loader, hostPath string) error {
	p := "/" + strings.TrimPrefix(strings.TrimPrefix(hostPath, b.root), "/")
	if filepath.Base(p) == filepath.Base(loader) {
		return nil // the loader itself, under any of its names
	}
	cmd := b.command(loader, "--list", p)
	cmd.SysProcAttr.Chroot = b.root
	cmd.Dir, cmd.Env = "/", []string{}
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("not found")) || err != nil {
		var problems []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "not found") || strings.Contains(l, "error") {
				problems = append(problems, strings.TrimSpace(l))
			}
		}
		return fmt.Errorf("check libraries: %s in the root: %s --list: %v: %s", p, loader, err, strings.Join(problems, "; "))
	}
	return nil
}
