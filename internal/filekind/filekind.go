// Package filekind names the type of a file for messages that refuse
// one: "a device", "a FIFO". nsbox refuses anything but a regular file
// where a device or a FIFO would block, never end, or have files created
// beside it (the program to run, the audit log).
package filekind

import "io/fs"

// Of names the type of mode: "a device", "a FIFO", "a socket",
// "a directory", or "not a regular file" for any other non-regular type.
func Of(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode.IsDir():
		return "a directory"
	}
	return "not a regular file"
}
