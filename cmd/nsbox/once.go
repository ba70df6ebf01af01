package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

// once is the value of a flag that may be given once. The flag package
// lets a second -c or --policy silently replace the first; for a program,
// a policy or a limit that would run something other than what the caller
// meant, so a second one is refused (a usage error: step "input").
type once struct {
	value string
	set   bool
}

// Set records v, or refuses a second value.
func (o *once) Set(v string) error {
	if o.set {
		return errors.New("given more than once")
	}
	o.value, o.set = v, true
	return nil
}

// String returns the value, or the default before any Set.
func (o *once) String() string { return o.value }

// onceFlag is a string flag that may be given once, with def as its
// default. Read it with c.String (or c.Duration for a duration).
func onceFlag(name string, aliases []string, def, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Aliases: aliases, Value: &once{value: def}, Usage: usage}
}
