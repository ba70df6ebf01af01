package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs2"
	"github.com/opencontainers/cgroups/fscommon"
)

// Stats is what a run used, read from its cgroup. Read it after Kill and
// before Destroy: the counters go with the directories.
type Stats struct {
	CPU        time.Duration // total CPU time used (v1 cpuacct.usage; v2 cpu.stat usage_usec)
	PeakMemory uint64        // v1 memory.max_usage_in_bytes; v2 memory.peak (Linux 5.19+) or 0 if unavailable
	OOMKills   uint64        // v1 memory.oom_control oom_kill (or memory.failcnt if that field is absent); v2 memory.events oom_kill
	PidsMaxHit uint64        // pids.events max (v2 and newer v1), 0 if unavailable
}

// Stats reads the run's usage counters.
func (c *Cgroup) Stats() (Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return Stats{}, fmt.Errorf("cgroup: stats of %s: cgroup destroyed", c.rel)
	}
	if c.v2 != nil {
		return statsV2(c.dir)
	}
	return statsV1(c.paths)
}

func statsV2(dir string) (Stats, error) {
	var s Stats
	usec, err := fscommon.GetValueByKey(dir, "cpu.stat", "usage_usec")
	if err != nil {
		return Stats{}, statsErr(dir, "cpu.stat", err)
	}
	s.CPU = time.Duration(usec) * time.Microsecond
	if s.PeakMemory, err = optionalUint(dir, "memory.peak"); err != nil {
		return Stats{}, err
	}
	// memory.events counts the whole subtree (memory.events.local would
	// not); oom_kill counts processes killed, so a group kill of n
	// processes counts n.
	if s.OOMKills, err = fs2.OOMKillCount(dir); err != nil {
		return Stats{}, statsErr(dir, "memory.events", err)
	}
	if s.PidsMaxHit, _, err = optionalKey(dir, "pids.events", "max"); err != nil {
		return Stats{}, err
	}
	return s, nil
}

func statsV1(paths map[string]string) (Stats, error) {
	var s Stats
	// cpuacct is optional (Detect warns): without it CPU stays 0.
	if dir, ok := paths["cpuacct"]; ok {
		ns, err := fscommon.GetCgroupParamUint(dir, "cpuacct.usage")
		if err != nil {
			return Stats{}, statsErr(dir, "cpuacct.usage", err)
		}
		s.CPU = time.Duration(ns)
	}
	if dir, ok := paths["memory"]; ok {
		peak, err := fscommon.GetCgroupParamUint(dir, "memory.max_usage_in_bytes")
		if err != nil {
			return Stats{}, statsErr(dir, "memory.max_usage_in_bytes", err)
		}
		s.PeakMemory = peak
		// oom_kill is in memory.oom_control since Linux 4.13; before,
		// failcnt (times the limit was hit) is the closest sign of OOM.
		kills, found, err := optionalKey(dir, "memory.oom_control", "oom_kill")
		if err != nil {
			return Stats{}, err
		}
		if !found {
			if kills, err = fscommon.GetCgroupParamUint(dir, "memory.failcnt"); err != nil {
				return Stats{}, statsErr(dir, "memory.failcnt", err)
			}
		}
		s.OOMKills = kills
	}
	if dir, ok := paths["pids"]; ok {
		hits, _, err := optionalKey(dir, "pids.events", "max")
		if err != nil {
			return Stats{}, err
		}
		s.PidsMaxHit = hits
	}
	return s, nil
}

// optionalUint reads a one-number file that older kernels lack (0 then).
func optionalUint(dir, file string) (uint64, error) {
	v, err := fscommon.GetCgroupParamUint(dir, file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, statsErr(dir, file, err)
	}
	return v, nil
}

// optionalKey reads the value of key in a "key value" file, telling apart
// a missing file or key (found false) from a zero; the library's
// GetValueByKey returns 0 for both.
func optionalKey(dir, file, key string) (v uint64, found bool, err error) {
	data, err := cgroups.ReadFile(dir, file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, statsErr(dir, file, err)
	}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		k, v, err := fscommon.ParseKeyValue(sc.Text())
		if err != nil {
			return 0, false, statsErr(dir, file, err)
		}
		if k == key {
			return v, true, nil
		}
	}
	return 0, false, nil
}

func statsErr(dir, file string, err error) error {
	return fmt.Errorf("cgroup: read %s: %w", filepath.Join(dir, file), err)
}
