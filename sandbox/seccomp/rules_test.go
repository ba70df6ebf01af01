package seccomp

import (
	"math/rand/v2"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// match is the reference semantics of a condition.
func match(c cond, x uint64) bool {
	switch c.op {
	case specs.OpMaskedEqual:
		return x&c.value == c.datum
	case specs.OpEqualTo:
		return x == c.value
	case specs.OpNotEqual:
		return x != c.value
	case specs.OpLessThan:
		return x < c.value
	case specs.OpLessEqual:
		return x <= c.value
	case specs.OpGreaterThan:
		return x > c.value
	case specs.OpGreaterEqual:
		return x >= c.value
	}
	panic(c.op)
}

var allOps = []specs.LinuxSeccompOperator{specs.OpMaskedEqual, specs.OpEqualTo, specs.OpNotEqual,
	specs.OpLessThan, specs.OpLessEqual, specs.OpGreaterThan, specs.OpGreaterEqual}

// smallCond draws a condition whose operands are below 256: a witness for
// two of them, if any, then exists below 512 (see TestIntersect).
func smallCond(r *rand.Rand) cond {
	op := allOps[r.IntN(len(allOps))]
	c := cond{op: op, value: r.Uint64N(256)}
	if op == specs.OpMaskedEqual {
		c.datum = r.Uint64N(256) & c.value
	}
	return c
}

// TestIntersect compares intersect with a brute-force search. With
// operands below 256, masks fix only the low 8 bits and ranges either stay
// below 256 or run to the maximum, so [0, 512) holds a witness if any
// value does.
func TestIntersect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := smallCond(r), smallCond(r)
		want := false
		for x := uint64(0); x < 512 && !want; x++ {
			want = match(a, x) && match(b, x)
		}
		if got := intersect(a, b); got != want {
			t.Fatalf("intersect(%s, %s) = %v, brute force says %v", a, b, got, want)
		}
	}
}

// TestMaskedInRange checks full-width cases against brute force near the
// interval's ends and a few hand-picked ones.
func TestMaskedInRange(t *testing.T) {
	for _, c := range []struct {
		iv          interval
		mask, datum uint64
		want        bool
	}{
		{interval{0, maxU64}, 0xffffffff, 0x5412, true},
		{interval{0x5413, 0xffffffff}, 0xffffffff, 0x5412, false},
		{interval{0x5413, maxU64}, 0xffffffff, 0x5412, true}, // 0x1_00005412
		{interval{1 << 63, maxU64}, 1 << 63, 0, false},
		{interval{5, 5}, 1, 1, true},
		{interval{6, 6}, 1, 1, false},
	} {
		if got := maskedInRange(c.iv, c.mask, c.datum); got != c.want {
			t.Errorf("maskedInRange(%#x, mask %#x, datum %#x) = %v, want %v", c.iv, c.mask, c.datum, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		lo := r.Uint64N(1024)
		iv := interval{lo, lo + r.Uint64N(64)}
		mask := r.Uint64N(2048)
		datum := r.Uint64N(2048) & mask
		want := false
		for x := iv.lo; x <= iv.hi && !want; x++ {
			want = x&mask == datum
		}
		if got := maskedInRange(iv, mask, datum); got != want {
			t.Fatalf("maskedInRange(%#x, mask %#x, datum %#x) = %v, brute force says %v", iv, mask, datum, got, want)
		}
	}
}

// TestComplement checks that the complement's blocks are disjoint and,
// with the patterns, cover every value exactly once.
func TestComplement(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	check := func(pats []cond, xs []uint64) {
		t.Helper()
		var one [][]cond
		for _, p := range pats {
			one = append(one, []cond{p})
		}
		comp, ok := complement(one, newBudget(1<<20))
		if !ok {
			t.Fatalf("patterns %v: complement gave up", pats)
		}
		for _, x := range xs {
			inPats := false
			for _, p := range pats {
				inPats = inPats || match(p, x)
			}
			n := 0
			for _, cs := range comp {
				if len(cs) != 1 || cs[0].index != 0 {
					t.Fatalf("patterns %v: block %v is not one condition on argument 0", pats, cs)
				}
				if match(cs[0], x) {
					n++
				}
			}
			if inPats && n != 0 || !inPats && n != 1 {
				t.Fatalf("patterns %v, x %#x: in patterns %v, in %d complement blocks %v", pats, x, inPats, n, comp)
			}
		}
	}
	for range 2000 {
		var pats []cond
		for range 1 + r.IntN(4) {
			if r.IntN(3) == 0 {
				pats = append(pats, cond{op: specs.OpEqualTo, value: r.Uint64()})
			} else {
				m := r.Uint64() & r.Uint64()
				pats = append(pats, cond{op: specs.OpMaskedEqual, value: m, datum: r.Uint64() & m})
			}
		}
		// Values near the patterns, where mistakes would show, and random ones.
		var xs []uint64
		for _, p := range pats {
			base := p.value
			if p.op == specs.OpMaskedEqual {
				base = p.datum | r.Uint64()&^p.value
			}
			xs = append(xs, base, base^1, base^(1<<63), base^(1<<uint(r.IntN(64))))
		}
		for range 20 {
			xs = append(xs, r.Uint64())
		}
		check(pats, xs)
	}
	// The default profile's ioctl: 34 blocks, TIOCSTI and TIOCLINUX
	// excluded whatever the high word.
	ioctl := []cond{{op: specs.OpMaskedEqual, value: 0xffffffff, datum: 0x5412}, {op: specs.OpMaskedEqual, value: 0xffffffff, datum: 0x541C}}
	if comp, _ := complement([][]cond{ioctl[:1], ioctl[1:]}, newBudget(34)); len(comp) != 34 {
		t.Errorf("ioctl complement: %d blocks, want 34", len(comp))
	}
	check(ioctl, []uint64{0x5412, 0x1_00005412, 0x541C, 0x541B, 0x5413, 0, maxU64})
}

// matchAll is the reference semantics of a conjunction on a call's
// arguments.
func matchAll(cs []cond, args [6]uint64) bool {
	for _, c := range cs {
		if !match(c, args[c.index]) {
			return false
		}
	}
	return true
}

// TestComplementArgs checks the complement of patterns on several
// arguments (one condition per argument each, in any order): its blocks
// are disjoint and, with the patterns, cover every call exactly once.
func TestComplementArgs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 1000 {
		var pats [][]cond
		for range 1 + r.IntN(4) {
			var pat []cond
			for _, index := range r.Perm(3)[:1+r.IntN(3)] {
				// Masks of a few bits, low ones mostly, so that random
				// calls hit the patterns. (An SCMP_CMP_EQ is a full mask:
				// TestComplement has those.)
				m := r.Uint64N(16) | 1<<uint(r.IntN(64))
				pat = append(pat, cond{index: uint(index), op: specs.OpMaskedEqual, value: m, datum: r.Uint64() & m})
			}
			pats = append(pats, pat)
		}
		comp, ok := complement(pats, newBudget(1<<20))
		if !ok {
			t.Fatalf("patterns %v: complement gave up", pats)
		}
		for _, cs := range comp {
			for i, c := range cs {
				if c.op != specs.OpMaskedEqual || i > 0 && cs[i-1].index >= c.index {
					t.Fatalf("patterns %v: block %v is not masked equalities in argument order", pats, cs)
				}
			}
		}
		for range 200 {
			var args [6]uint64
			for i := range 3 {
				args[i] = r.Uint64N(4) | r.Uint64()&^0xf
				if r.IntN(2) == 0 {
					args[i] = r.Uint64N(16)
				}
			}
			inPats := false
			for _, p := range pats {
				inPats = inPats || matchAll(p, args)
			}
			n := 0
			for _, cs := range comp {
				if matchAll(cs, args) {
					n++
				}
			}
			if inPats && n != 0 || !inPats && n != 1 {
				t.Fatalf("patterns %v, call %#x: in patterns %v, in %d complement blocks %v", pats, args[:3], inPats, n, comp)
			}
		}
	}
}

// TestComplementLimit: exceptions whose blocks multiply make complement
// give up rather than build a filter that cannot load, or spend minutes
// trying. Pattern i is "bit i of argument 0, and argument 1 is i": each of
// the 2^20 combinations of those bits is a block of argument 0 that goes
// on to argument 1 with its own patterns.
func TestComplementLimit(t *testing.T) {
	var pats [][]cond
	for i := range uint64(20) {
		pats = append(pats, []cond{{index: 0, op: specs.OpMaskedEqual, value: 1 << i, datum: 1 << i}, {index: 1, op: specs.OpEqualTo, value: i}})
	}
	if comp, ok := complement(pats, newBudget(4096)); ok {
		t.Fatalf("complement of %d two-argument patterns: %d blocks, want it to give up past 4096", len(pats), len(comp))
	}
	// One pattern: bit 0 clear, or bit 0 set and argument 1 one of the
	// 64 blocks that are not 0.
	if comp, ok := complement(pats[:1], newBudget(4096)); !ok || len(comp) != 1+64 {
		t.Fatalf("complement of one two-argument pattern: %d blocks (ok %v), want 1+64", len(comp), ok)
	}
}
