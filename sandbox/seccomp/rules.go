package seccomp

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nsbox/nsbox/sandbox/seccomp/load"
)

// maxU64 is the largest argument value.
const maxU64 = math.MaxUint64

// cond is one argument condition: arg[index] op value, or for
// SCMP_CMP_MASKED_EQ (arg[index] & value) == datum.
type cond struct {
	index uint
	op    specs.LinuxSeccompOperator
	value uint64
	datum uint64
}

// rule is one syscall's rule: all of conds must hold for act to apply.
type rule struct {
	syscall string
	act     action
	conds   []cond
	where   string // "syscalls[3]", for messages
	line    int
}

func (c cond) String() string {
	ops := map[specs.LinuxSeccompOperator]string{
		specs.OpNotEqual: "!=", specs.OpLessThan: "<", specs.OpLessEqual: "<=",
		specs.OpEqualTo: "==", specs.OpGreaterEqual: ">=", specs.OpGreaterThan: ">",
	}
	if c.op == specs.OpMaskedEqual {
		return fmt.Sprintf("arg%d & %#x == %#x", c.index, c.value, c.datum)
	}
	return fmt.Sprintf("arg%d %s %#x", c.index, ops[c.op], c.value)
}

// interval is the closed range [lo, hi] of argument values.
type interval struct{ lo, hi uint64 }

// intervals is the set of values a non-masked condition matches.
func (c cond) intervals() []interval {
	v := c.value
	switch c.op {
	case specs.OpEqualTo:
		return []interval{{v, v}}
	case specs.OpNotEqual:
		var out []interval
		if v > 0 {
			out = append(out, interval{0, v - 1})
		}
		if v < maxU64 {
			out = append(out, interval{v + 1, maxU64})
		}
		return out
	case specs.OpLessThan:
		if v == 0 {
			return nil
		}
		return []interval{{0, v - 1}}
	case specs.OpLessEqual:
		return []interval{{0, v}}
	case specs.OpGreaterThan:
		if v == maxU64 {
			return nil
		}
		return []interval{{v + 1, maxU64}}
	case specs.OpGreaterEqual:
		return []interval{{v, maxU64}}
	}
	panic(fmt.Sprintf("seccomp: bug: intervals of %q", c.op))
}

// always reports whether every value matches c.
func (c cond) always() bool {
	if c.op == specs.OpMaskedEqual {
		return c.value == 0
	}
	iv := c.intervals()
	return len(iv) == 1 && iv[0] == interval{0, maxU64}
}

// never reports whether no value matches c.
func (c cond) never() bool {
	if c.op == specs.OpMaskedEqual {
		return c.datum&^c.value != 0
	}
	return len(c.intervals()) == 0
}

// intersect reports whether some value matches both a and b (same index).
func intersect(a, b cond) bool {
	am, bm := a.op == specs.OpMaskedEqual, b.op == specs.OpMaskedEqual
	switch {
	case am && bm:
		// The bits both masks fix must agree.
		return (a.datum^b.datum)&a.value&b.value == 0
	case am || bm:
		if bm {
			a, b = b, a
		}
		for _, iv := range b.intervals() {
			if maskedInRange(iv, a.value, a.datum) {
				return true
			}
		}
		return false
	default:
		for _, x := range a.intervals() {
			for _, y := range b.intervals() {
				if x.lo <= y.hi && y.lo <= x.hi {
					return true
				}
			}
		}
		return false
	}
}

// maskedInRange reports whether some x in iv has x&mask == datum. It walks
// the bits from the top, tracking whether the prefix chosen so far still
// equals lo's prefix (so the next bit may not go below lo's) and hi's.
func maskedInRange(iv interval, mask, datum uint64) bool {
	// reach[atLo<<1|atHi]: that state is reachable.
	reach := [4]bool{3: true}
	for i := 63; i >= 0; i-- {
		bit := uint64(1) << i
		var next [4]bool
		for s, ok := range reach {
			if !ok {
				continue
			}
			atLo, atHi := s&2 != 0, s&1 != 0
			for _, b := range [2]uint64{0, bit} {
				if mask&bit != 0 && b != datum&bit {
					continue // a fixed bit
				}
				if atLo && b < iv.lo&bit || atHi && b > iv.hi&bit {
					continue // would leave the range
				}
				n := 0
				if atLo && b == iv.lo&bit {
					n |= 2
				}
				if atHi && b == iv.hi&bit {
					n |= 1
				}
				next[n] = true
			}
		}
		reach = next
	}
	return reach != [4]bool{}
}

// overlap reports whether one call can match both rules: on every argument
// both constrain, their conditions intersect.
func overlap(a, b rule) bool {
	for _, x := range a.conds {
		for _, y := range b.conds {
			if x.index == y.index && !intersect(x, y) {
				return false
			}
		}
	}
	return true
}

// complement returns disjoint conjunctions of masked-equality conditions
// that together match exactly the calls no pattern in pats matches. Each
// pattern is a conjunction of SCMP_CMP_EQ or SCMP_CMP_MASKED_EQ
// conditions, at most one per argument. It decides one argument at a
// time, the lowest one some pattern still constrains: it splits that
// argument's values on one bit at a time, the highest bit some pattern
// still cares about, until each pattern matches the whole block or none of
// it. A block that a pattern with no other condition matches is covered;
// one that no pattern reaches is emitted (with the conditions that led to
// it); in any other, the patterns that match it go on to their next
// argument. With every pattern on one argument, each block is one
// condition.
//
// Patterns on several arguments can multiply each other's blocks: when
// the blocks or the work exceed what b has left, complement stops and
// returns false.
func complement(pats [][]cond, b *budget) ([][]cond, bool) {
	var out [][]cond
	over := func() bool { return len(out) > b.blocks || b.steps < 0 }
	var decide func(prefix []cond, live [][]cond)
	decide = func(prefix []cond, live [][]cond) {
		if over() {
			return
		}
		if len(live) == 0 {
			out = append(out, prefix)
			return
		}
		index := live[0][0].index
		for _, p := range live {
			index = min(index, p[0].index)
		}
		// on: the patterns that constrain this argument; the others
		// carry over unchanged to every block.
		var on, rest [][]cond
		for _, p := range live {
			if p[0].index == index {
				on = append(on, p)
			} else {
				rest = append(rest, p)
			}
		}
		var walk func(mask, datum uint64, cands, matched [][]cond)
		walk = func(mask, datum uint64, cands, matched [][]cond) {
			if b.steps--; over() {
				return
			}
			var undecided uint64
			var open [][]cond
			for _, p := range cands {
				if p[0].value&^mask != 0 {
					undecided |= p[0].value &^ mask
					open = append(open, p)
				} else if len(p) == 1 {
					return // p matches the whole block
				} else {
					matched = append(slices.Clip(matched), p[1:])
				}
			}
			if len(open) == 0 {
				block := slices.Clip(prefix)
				if mask != 0 {
					block = append(block, cond{index: index, op: specs.OpMaskedEqual, value: mask, datum: datum})
				}
				decide(block, append(slices.Clip(rest), matched...))
				return
			}
			bit := uint64(1) << (63 - bits.LeadingZeros64(undecided))
			for _, d := range [2]uint64{datum, datum | bit} {
				var keep [][]cond
				for _, p := range open {
					if (p[0].datum^d)&p[0].value&bit == 0 {
						keep = append(keep, p)
					}
				}
				walk(mask|bit, d, keep, matched)
			}
		}
		walk(0, 0, on, nil)
	}
	// Each pattern as masked equalities, in argument order.
	masked := make([][]cond, len(pats))
	for i, pat := range pats {
		for _, c := range pat {
			if c.op == specs.OpEqualTo {
				c = cond{index: c.index, op: specs.OpMaskedEqual, value: maxU64, datum: c.value}
			}
			masked[i] = append(masked[i], c)
		}
		slices.SortFunc(masked[i], func(x, y cond) int { return cmp.Compare(x.index, y.index) })
	}
	decide(nil, masked)
	if over() {
		return nil, false
	}
	b.blocks -= len(out)
	return out, true
}

// budget is what complement may still add to a profile's plan: blocks,
// each a rule of at least one instruction, and steps of work.
type budget struct{ blocks, steps int }

// newBudget allows blocks blocks, and the steps to find them: each is
// reached by at most 64 splits per argument.
func newBudget(blocks int) *budget { return &budget{blocks: blocks, steps: 6 * 64 * blocks} }

// plan checks the rules of each syscall against each other and returns
// what Compile must add to libseccomp, in profile order.
func plan(rules []rule) ([]rule, error) {
	// Every rule costs an instruction, and so will every block the
	// complements add (parse has checked the rules alone fit).
	b := newBudget(load.MaxInsns - len(rules))
	var order []string
	bySyscall := map[string][]rule{}
	for _, r := range rules {
		if _, ok := bySyscall[r.syscall]; !ok {
			order = append(order, r.syscall)
		}
		bySyscall[r.syscall] = append(bySyscall[r.syscall], r)
	}
	var out []rule
	for _, name := range order {
		rs, err := planSyscall(bySyscall[name], b)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// planSyscall handles the rules of one syscall. libseccomp silently keeps
// only the first of two unconditional rules, lets an unconditional rule
// swallow every conditional one, and picks an undocumented order between
// overlapping conditional rules: each case is either refused or, for
// "unconditional rule plus exceptions", compiled explicitly.
func planSyscall(rs []rule, b *budget) ([]rule, error) {
	var uncond, conds []rule
	for _, r := range rs {
		if len(r.conds) == 0 {
			uncond = append(uncond, r)
		} else {
			conds = append(conds, r)
		}
	}
	if len(uncond) > 1 {
		return nil, &ruleError{line: uncond[1].line, field: fmt.Sprintf("%s %q", uncond[1].where, uncond[1].syscall),
			err: fmt.Errorf("also listed without conditions in %s: list each syscall once", uncond[0].where)}
	}
	for i, a := range conds {
		for _, b := range conds[i+1:] {
			if a.act != b.act && overlap(a, b) {
				return nil, &ruleError{line: b.line, field: fmt.Sprintf("%s %q", b.where, b.syscall),
					err: fmt.Errorf("can match the same call as %s with a different action (%s, not %s): make the conditions disjoint", a.where, b.act, a.act)}
			}
		}
	}
	if len(uncond) == 0 {
		return conds, nil
	}
	fallback := uncond[0]
	var exceptions [][]cond
	for _, r := range conds {
		if r.act == fallback.act {
			continue
		}
		for _, c := range r.conds {
			if c.op != specs.OpEqualTo && c.op != specs.OpMaskedEqual {
				return nil, &ruleError{line: r.line, field: fmt.Sprintf("%s %q", r.where, r.syscall),
					err: fmt.Errorf("is an exception to the unconditional rule in %s: an exception's conditions must be %s or %s",
						fallback.where, specs.OpEqualTo, specs.OpMaskedEqual)}
			}
		}
		exceptions = append(exceptions, r.conds)
	}
	if len(exceptions) == 0 {
		// Conditional rules with the fallback's own action add nothing.
		return uncond, nil
	}
	// The exceptions as written, then the fallback on every other call.
	blocks, ok := complement(exceptions, b)
	if !ok {
		return nil, &ruleError{line: fallback.line, field: fmt.Sprintf("%s %q", fallback.where, fallback.syscall),
			err: fmt.Errorf("with its exceptions, this and the profile's other rules need more than the %d instructions a filter holds (write fewer exceptions, or exceptions on fewer arguments)", load.MaxInsns)}
	}
	out := conds
	for _, cs := range blocks {
		out = append(out, rule{syscall: fallback.syscall, act: fallback.act, conds: cs,
			where: fallback.where + " (unconditional, outside the exceptions)", line: fallback.line})
	}
	return out, nil
}
