// Command gendoc writes docs/policies.md, the policy reference, from the
// key table: go generate ./policies runs it.
package main

import (
	"fmt"
	"os"

	"github.com/nsbox/nsbox/policies/internal/refpage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc OUT.md")
		os.Exit(2)
	}
	page, err := refpage.Render()
	if err == nil {
		err = os.WriteFile(os.Args[1], page, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gendoc: %v\n", err)
		os.Exit(1)
	}
}
