// Command nsbox-init is the sandbox init on its own: what `nsbox init`
// runs, in a binary built without cgo. The supervisor re-executes an init
// for every run, inside the new namespaces, and this one starts faster
// than the nsbox binary (cgo for libseccomp and SQLite, a dozen package
// initialisers; docs/benchmarks.md). nsbox starts it when it lies
// next to the nsbox binary, owned by root and writable by root only
// (supervisor.InitBinary); otherwise nsbox re-executes itself.
//
// It is internal to nsbox: run by hand it refuses, as the init does
// outside a sandbox's namespaces.
package main

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/sandbox/initproc"
)

func main() {
	inv, ok := initproc.Args(os.Args)
	if !ok {
		fmt.Fprintf(os.Stderr, "nsbox-init: internal to nsbox (nsbox run starts it as %q)\n",
			"nsbox-init "+initproc.Command+" --sync-fd N --status-fd M")
		os.Exit(2)
	}
	initproc.Main(inv) // returns only via os.Exit
}
