package audit

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkBeginFinish is the audit cost of one run as the supervisor pays
// it on an open database: Begin at the start, Finish at the end, with a
// 1 KiB head per stream, stored code, two labels and two violations.
// Besides the mean (ns/op) it reports the median and p95 of one
// Begin+Finish pair, which should stay well under a millisecond.
func BenchmarkBeginFinish(b *testing.B) {
	db := newDB(b)
	// A log that is not empty, so the chain head is looked up in an index
	// of some depth rather than in an empty table.
	for i := range 2000 {
		r := sampleRun(fmt.Sprintf("warm-%d", i))
		finishSample(r)
		if err := db.Finish(r); err != nil {
			b.Fatal(err)
		}
	}
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := sampleRun(fmt.Sprintf("bench-%d", i))
		start := time.Now()
		if err := db.Begin(r); err != nil {
			b.Fatal(err)
		}
		finishSample(r)
		if err := db.Finish(r); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, samples)
}

// BenchmarkBeginFinishNetwork is BenchmarkBeginFinish for a run in network
// allowlist mode that opened 0, 50 or 1000 (result.MaxConnectionRecords)
// connections: what the connections add to a row's write.
func BenchmarkBeginFinishNetwork(b *testing.B) {
	for _, n := range []int{0, 50, 1000} {
		b.Run(fmt.Sprintf("connections=%d", n), func(b *testing.B) {
			db := newDB(b)
			for i := range 2000 {
				r := sampleRun(fmt.Sprintf("warm-%d", i))
				finishSample(r)
				r.Network = sampleNetwork(3)
				if err := db.Finish(r); err != nil {
					b.Fatal(err)
				}
			}
			network := sampleNetwork(n)
			samples := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				r := sampleRun(fmt.Sprintf("bench-%d", i))
				start := time.Now()
				if err := db.Begin(r); err != nil {
					b.Fatal(err)
				}
				finishSample(r)
				r.Network = network
				if err := db.Finish(r); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkOpenClose is the rest of a run's audit cost: opening the
// existing database in a new process (the schema check) and closing it.
func BenchmarkOpenClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.db")
	db, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	record(b, db, "first")
	db.Close()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		db, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, samples)
}

// BenchmarkRunLifecycle is everything one nsbox process does with the log,
// as a new process does it: Open (a new connection, the schema check), Begin
// and Finish on a cold connection, and Close. It reports the median of each
// phase in two cases. alone: no other process has the database open, so
// Close, as the last connection, checkpoints the WAL into the database and
// removes it (fsyncs), and the next first write recreates the WAL (an fsync
// of its header). alongside: another process holds it open, as when runs
// overlap, so neither happens.
func BenchmarkRunLifecycle(b *testing.B) {
	for _, tc := range []struct {
		name      string
		alongside bool
	}{{"alone", false}, {"alongside", true}} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "audit.db")
			if tc.alongside {
				other, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer other.Close()
				record(b, other, "other") // its connection now shares the WAL
			}
			lifecycles(b, path)
		})
	}
}

func lifecycles(b *testing.B, path string) {
	var open, write, closing []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		db, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r := sampleRun(fmt.Sprintf("life-%d", i))
		if err := db.Begin(r); err != nil {
			b.Fatal(err)
		}
		finishSample(r)
		if err := db.Finish(r); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		open, write, closing = append(open, t1.Sub(t0)), append(write, t2.Sub(t1)), append(closing, t3.Sub(t2))
	}
	b.StopTimer()
	for _, phase := range []struct {
		name    string
		samples []time.Duration
	}{{"open", open}, {"begin+finish", write}, {"close", closing}} {
		slices.Sort(phase.samples)
		b.ReportMetric(float64(phase.samples[len(phase.samples)/2].Microseconds()), phase.name+"-median-µs")
	}
}

// BenchmarkVerify walks a chain of 10,000 rows; ns/op is for the whole walk.
func BenchmarkVerify(b *testing.B) {
	db := newDB(b)
	for i := range 10_000 {
		r := sampleRun(fmt.Sprintf("v-%05d", i))
		finishSample(r)
		if err := db.Finish(r); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if v, err := db.VerifyChain(); err != nil || v.Break != nil || v.Rows != 10_000 {
			b.Fatalf("VerifyChain = %+v, %v", v, err)
		}
	}
}

func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(p float64) float64 {
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds())
	}
	b.ReportMetric(at(0.50), "median-µs")
	b.ReportMetric(at(0.95), "p95-µs")
}

// BenchmarkReapInRun is what a run's reaper does on a log of 2000 finished
// rows: with nothing unfinished (the common case: one cheap query on the
// status index), with 8 live runs going (a kill(2) and a /proc read each),
// and with 8 orphans to finish (ns/op is per orphan finished).
func BenchmarkReapInRun(b *testing.B) {
	for _, tc := range []string{"none", "live", "orphans"} {
		b.Run(tc, func(b *testing.B) {
			db := newDB(b)
			for i := range 2000 {
				r := sampleRun(fmt.Sprintf("warm-%d", i))
				finishSample(r)
				if err := db.Finish(r); err != nil {
					b.Fatal(err)
				}
			}
			if tc == "live" {
				for i := range 8 {
					if err := db.Begin(sampleRun(fmt.Sprintf("live-%d", i))); err != nil {
						b.Fatal(err)
					}
				}
			}
			dead := *thisHost().self
			dead.BootID = "other"
			want := 0
			for i := 0; b.Loop(); i++ {
				if tc == "orphans" {
					b.StopTimer()
					for j := range 8 {
						r := sampleRun(fmt.Sprintf("o-%d-%d", i, j))
						r.Supervisor = &dead
						if err := db.Begin(r); err != nil {
							b.Fatal(err)
						}
					}
					want = 8
					b.StartTimer()
				}
				n, err := db.Reap(context.Background(), ReapInRun)
				if err != nil || n != want {
					b.Fatalf("Reap = %d, %v; want %d", n, err, want)
				}
			}
			if tc == "orphans" {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(8*b.N), "ns/orphan")
			}
		})
	}
}
