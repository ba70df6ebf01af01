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
		comp := complement(0, pats)
		for _, x := range xs {
			inPats := false
			for _, p := range pats {
				inPats = inPats || match(p, x)
			}
			n := 0
			for _, c := range comp {
				if match(c, x) {
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
	if n := len(complement(1, ioctl)); n != 34 {
		t.Errorf("ioctl complement: %d blocks, want 34", n)
	}
	check(ioctl, []uint64{0x5412, 0x1_00005412, 0x541C, 0x541B, 0x5413, 0, maxU64})
}
