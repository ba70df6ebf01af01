package trace

import (
	"testing"
)

// TestPhasesInTimeOrder: marks added out of order (the init's, after the
// host's) are timed in the order they ended.
func TestPhasesInTimeOrder(t *testing.T) {
	r := New(true, 1_000_000)
	r.marks = append(r.marks, Mark{"host wait", 3_500_000}, Mark{"init step", 3_000_000}, Mark{"c", 5_000_000})
	got := r.Phases()
	want := []struct {
		name string
		ms   float64
	}{{"init step", 2}, {"host wait", 0.5}, {"c", 1.5}}
	if len(got) != len(want) {
		t.Fatalf("phases %v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].MS != w.ms {
			t.Errorf("phase %d = %+v, want %s=%v", i, got[i], w.name, w.ms)
		}
	}
}

func TestOffRecordsNothing(t *testing.T) {
	for _, r := range []*Recorder{nil, New(false, Now())} {
		r.Mark("x")
		r.Add("init: ", []Mark{{"y", Now()}})
		if r.On() || r.Phases() != nil || r.Marks() != nil {
			t.Errorf("recorder %v recorded while off", r)
		}
	}
}

func TestAddPrefixesAndNowAdvances(t *testing.T) {
	r := New(true, Now())
	r.Mark("host")
	r.Add("init: ", []Mark{{"step", Now()}})
	r.Mark("after")
	ph := r.Phases()
	if len(ph) != 3 || ph[1].Name != "init: step" {
		t.Fatalf("phases %+v, want host, init: step, after", ph)
	}
	for _, p := range ph {
		if p.MS < 0 {
			t.Errorf("negative phase %+v", p)
		}
	}
}
