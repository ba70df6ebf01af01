// Package policies loads and validates nsbox sandbox policies: the shipped
// built-ins (embedded from the .toml files in this directory) and policy
// files written by users, including policies that extend another.
//
// The schema is one table, schema.go: one Key per policy key with its
// type (from the Policy field it sets), unit, range, whether it is
// required, an example, its documentation and its checks. Decoding
// (decode.go), validation (validate.go), composition (compose.go), error
// text, writing a policy back (encode.go) and the reference page
// docs/policies.md are all derived from it. That page documents the
// format, every key and how extends resolves; this comment does not repeat
// it. After changing the table, run go generate ./policies: a test fails
// while the checked-in page is stale.
//
// Every error is an *Error that names the file, line and key at fault and
// what would be accepted.
//
// Command-line flags arrive as Overrides and are applied with
// Policy.Narrow. They can only lower a limit, never raise it: a policy is
// the most a run may get, and whoever picks the policy, not whoever types
// the command, decides that maximum.
package policies

//go:generate go run ./internal/gendoc ../docs/policies.md
