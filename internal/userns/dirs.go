package userns

import (
	"os"
	"os/user"
	"path/filepath"
	"syscall"
)

// Where a user's nsbox keeps its files when it runs without host root:
// the XDG base directories (freedesktop.org), each under "nsbox". Root's
// defaults (/var/lib/nsbox and below) stay with the packages that own
// them; they ask UserDirs only when the effective uid is not 0, and
// Enter exports the answers to the outer namespace, where it is.

// StateHome is $XDG_STATE_HOME/nsbox, by default ~/.local/state/nsbox:
// runs, the audit database, the seccomp cache.
func StateHome() string { return xdg("XDG_STATE_HOME", ".local/state") }

// DataHome is $XDG_DATA_HOME/nsbox, by default ~/.local/share/nsbox: the
// roots a user builds.
func DataHome() string { return xdg("XDG_DATA_HOME", ".local/share") }

// RuntimeDir is $XDG_RUNTIME_DIR/nsbox when that is set and the
// directory is this user's (a per-user tmpfs that systemd removes at
// logout; an environment inherited from another user, su's for one,
// names someone else's), else StateHome: the id locks of a subordinate
// id range, which only this user's runs share.
func RuntimeDir() string {
	d := os.Getenv("XDG_RUNTIME_DIR")
	var st syscall.Stat_t
	if filepath.IsAbs(d) && syscall.Stat(d, &st) == nil && int(st.Uid) == os.Geteuid() {
		return filepath.Join(d, "nsbox")
	}
	return StateHome()
}

// xdg returns $env/nsbox, or $HOME/fallback/nsbox when env is unset or
// not absolute (the specification says to ignore a relative one). With
// neither, the user database's home directory.
func xdg(env, fallback string) string {
	if d := os.Getenv(env); filepath.IsAbs(d) {
		return filepath.Join(d, "nsbox")
	}
	home := os.Getenv("HOME")
	if !filepath.IsAbs(home) {
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	return filepath.Join(home, fallback, "nsbox")
}
