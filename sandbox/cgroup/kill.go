package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

const (
	// settleTime is how long one kill round waits for its victims to
	// leave the cgroup before the next round.
	settleTime = 100 * time.Millisecond
	// pollInterval is how often membership is re-read while waiting.
	pollInterval = 5 * time.Millisecond
)

// Kill kills every process in the cgroup and returns once it is empty. On
// v2 it writes cgroup.kill (Linux 5.14+); otherwise (v1, older v2) it
// SIGKILLs every process it lists, and from the second round on freezes
// the cgroup first and thaws it after. It repeats until the cgroup is
// empty, and fails if it is not after 5 seconds. Killing an empty (or
// already removed) cgroup succeeds.
//
// WARNING: this is what ends a run that misbehaves (timeout, stop, crashed
// supervisor via Sweep). After any change here, run as root:
//
//	go test -race -count=1 -run 'Kill|Destroy|Sweep' ./sandbox/cgroup/
func (c *Cgroup) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	return c.kill()
}

// kill is Kill with c.mu held. Every round re-reads the members: a round
// can miss a process (one forked while the freezer was still settling, or
// moved in by someone else), so only an empty cgroup ends the loop.
func (c *Cgroup) kill() error {
	deadline := time.Now().Add(c.h.killTimeout)
	var roundErr error
	round := 0
	for {
		pids, err := c.members()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			err := fmt.Errorf("cgroup: kill %s: %d processes still in it after %s (pids %v)",
				c.where(), len(pids), c.h.killTimeout, pids)
			if roundErr != nil {
				err = fmt.Errorf("%w; last round: %w", err, roundErr)
			}
			return err
		}
		roundErr = c.killRound(round > 0)
		round++
		until := time.Now().Add(settleTime)
		if until.After(deadline) {
			until = deadline
		}
		c.waitEmpty(until)
	}
}

// killRound kills what is in the cgroup now, once; without cgroup.kill,
// freezing it first when freeze is set.
func (c *Cgroup) killRound(freeze bool) error {
	if c.v2 != nil {
		kill := filepath.Join(c.dir, "cgroup.kill")
		if _, err := os.Stat(kill); err == nil {
			// The kernel kills the whole subtree and fails forks racing
			// with it: nothing escapes between listing and signalling.
			if err := cgroups.WriteFile(c.dir, "cgroup.kill", "1"); err != nil {
				return fmt.Errorf("cgroup: write 1 to %s: %w", kill, err)
			}
			return nil
		}
	}
	// The first round only signals. A freeze has a price: a process
	// frozen before it ran its SIGKILL stays alive until the thaw, and
	// the v1 freezer's retry loop (opencontainers/cgroups writes and
	// re-reads freezer.state until FROZEN) burns the CPU that the dying
	// processes need, which on a loaded host with many runs stopping at
	// once delays every one of them. Only a process that forked between
	// the listing and the signal survives the round, and that is what
	// the next rounds freeze for.
	if !freeze {
		return signalAll(c.members)
	}
	// Frozen processes cannot fork, so the list below is complete; the
	// SIGKILLs take effect when thawed. A failed freeze (the v1 freezer
	// can stay FREEZING while processes keep forking) still kills what
	// it sees: the next round gets the rest.
	freezeErr := c.freeze(cgroups.Frozen)
	killErr := signalAll(c.members)
	thawErr := c.freeze(cgroups.Thawed)
	return errors.Join(freezeErr, killErr, thawErr)
}

func (c *Cgroup) freeze(state cgroups.FreezerState) error {
	var err error
	if c.v2 != nil {
		err = c.v2.Freeze(state)
	} else {
		err = c.v1.Freeze(state)
	}
	if err != nil {
		return fmt.Errorf("cgroup: set %s to %s: %w", c.where(), state, err)
	}
	return nil
}

// signalAll SIGKILLs every process that list returns, through pidfds. A pid
// is signalled only if list still returns it after its pidfd was opened:
// then the pidfd is that member (were it another process that got the pid
// later, that one would be in the cgroup too). So a member that exits and
// is reaped (the init's parent is the supervisor, outside the cgroup)
// cannot get an unrelated process that reused its pid killed.
func signalAll(list func() ([]int, error)) error {
	pids, err := list()
	if err != nil {
		return err
	}
	fds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // already gone
		}
		if err != nil {
			return fmt.Errorf("cgroup: pidfd_open %d: %w", pid, err)
		}
		fds[pid] = fd
	}
	still, err := list()
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range still {
		fd, ok := fds[pid]
		if !ok {
			continue // new since the first listing: the next round
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("cgroup: pidfd_send_signal SIGKILL to %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

// members returns the pids in the cgroup and its descendants, over all its
// directories, sorted. A directory that no longer exists has none.
// Zombies are not members: the kernel takes a process out of its cgroup
// when it exits, not when it is reaped.
func (c *Cgroup) members() ([]int, error) {
	seen := make(map[int]bool)
	for _, dir := range c.dirs() {
		pids, err := cgroups.GetAllPids(dir)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup: list processes of %s: %w", dir, err)
		}
		for _, pid := range pids {
			seen[pid] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// waitEmpty polls until the cgroup is empty or until passes. Errors are
// left to the caller's next members().
func (c *Cgroup) waitEmpty(until time.Time) {
	for time.Now().Before(until) {
		if pids, err := c.members(); err != nil || len(pids) == 0 {
			return
		}
		time.Sleep(pollInterval)
	}
}
