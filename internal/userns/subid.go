package userns

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// An idRange is a run of consecutive ids: in /etc/subuid, a caller's
// subordinate ids; in a uid_map line, ids inside and where they map.
type idRange struct {
	Start, Count uint32
}

// subordinate returns the caller's first range in file (/etc/subuid or
// /etc/subgid, lines "name:start:count" or "uid:start:count") of at least
// min ids, or ok false when there is none (no file, no line).
func subordinate(file, name string, id int, min uint32) (r idRange, ok bool, err error) {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("open %s: %w", file, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		who, rest, _ := strings.Cut(line, ":")
		if who != name && who != strconv.Itoa(id) {
			continue
		}
		s, c, _ := strings.Cut(rest, ":")
		start, err1 := strconv.ParseUint(s, 10, 32)
		count, err2 := strconv.ParseUint(c, 10, 32)
		if err1 != nil || err2 != nil {
			return r, false, fmt.Errorf("%s line %d: %q: want NAME:START:COUNT", file, n, line)
		}
		if uint32(count) >= min {
			return idRange{uint32(start), uint32(count)}, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return r, false, fmt.Errorf("read %s: %w", file, err)
	}
	return r, false, nil
}

// mapLine is one line of a uid_map or gid_map.
type mapLine struct {
	Inside, Outside, Count uint32
}

// readMap parses a uid_map or gid_map.
func readMap(path string) ([]mapLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var m []mapLine
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var v [3]uint64
		for i := range v {
			if len(f) != 3 {
				return nil, fmt.Errorf("%s: line %q: want three numbers", path, strings.TrimSpace(line))
			}
			if v[i], err = strconv.ParseUint(f[i], 10, 32); err != nil {
				return nil, fmt.Errorf("%s: line %q: %w", path, strings.TrimSpace(line), err)
			}
		}
		m = append(m, mapLine{uint32(v[0]), uint32(v[1]), uint32(v[2])})
	}
	return m, nil
}

// MappedIDs returns the ids, other than 0, that this user namespace maps
// as both uids and gids, from its largest extent: where a run's own ids
// may come from inside nsbox's outer namespace. count is 0 when the
// namespace maps one id alone (the caller's, as 0).
func MappedIDs() (first, count uint32, err error) {
	var best idRange
	uids, err := readMap("/proc/self/uid_map")
	if err != nil {
		return 0, 0, err
	}
	gids, err := readMap("/proc/self/gid_map")
	if err != nil {
		return 0, 0, err
	}
	for _, u := range uids {
		r := idRange{u.Inside, u.Count}
		if r.Start == 0 { // 0 is nsbox itself: never a run's
			if r.Count <= 1 {
				continue
			}
			r = idRange{1, r.Count - 1}
		}
		r = r.within(gids)
		if r.Count > best.Count {
			best = r
		}
	}
	return best.Start, best.Count, nil
}

// within narrows r to its first part that the map m also covers.
func (r idRange) within(m []mapLine) idRange {
	for _, l := range m {
		lo, hi := uint64(l.Inside), uint64(l.Inside)+uint64(l.Count)
		if uint64(r.Start) >= lo && uint64(r.Start) < hi {
			end := min(uint64(r.Start)+uint64(r.Count), hi)
			return idRange{r.Start, uint32(end - uint64(r.Start))}
		}
	}
	return idRange{}
}
