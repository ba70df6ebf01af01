package result

import (
	"errors"
	"fmt"
	"syscall"
)

// SandboxError says which setup step failed, with the errno, so callers can
// act on it.
type SandboxError struct {
	Step    string `json:"step"`            // e.g. "pivot_root", "bind /usr/lib/python3.11", "execve"
	Errno   string `json:"errno,omitempty"` // symbolic, e.g. "EPERM"; empty if not a syscall error
	Message string `json:"message"`
}

// NewSandboxError describes err as the failure of step. Errno is filled in
// when err wraps a syscall.Errno.
func NewSandboxError(step string, err error) *SandboxError {
	e := &SandboxError{Step: step, Message: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		e.Errno = ErrnoName(errno)
	}
	return e
}

// Error returns "step: message".
func (e *SandboxError) Error() string {
	return fmt.Sprintf("%s: %s", e.Step, e.Message)
}

// errnoNames covers the errnos sandbox setup and execve can return.
var errnoNames = map[syscall.Errno]string{
	syscall.EPERM:        "EPERM",
	syscall.ENOENT:       "ENOENT",
	syscall.ESRCH:        "ESRCH",
	syscall.EINTR:        "EINTR",
	syscall.EIO:          "EIO",
	syscall.ENXIO:        "ENXIO",
	syscall.E2BIG:        "E2BIG",
	syscall.ENOEXEC:      "ENOEXEC",
	syscall.EBADF:        "EBADF",
	syscall.ECHILD:       "ECHILD",
	syscall.EAGAIN:       "EAGAIN",
	syscall.ENOMEM:       "ENOMEM",
	syscall.EACCES:       "EACCES",
	syscall.EFAULT:       "EFAULT",
	syscall.ENOTBLK:      "ENOTBLK",
	syscall.EBUSY:        "EBUSY",
	syscall.EEXIST:       "EEXIST",
	syscall.EXDEV:        "EXDEV",
	syscall.ENODEV:       "ENODEV",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.EISDIR:       "EISDIR",
	syscall.EINVAL:       "EINVAL",
	syscall.ENFILE:       "ENFILE",
	syscall.EMFILE:       "EMFILE",
	syscall.ENOTTY:       "ENOTTY",
	syscall.ETXTBSY:      "ETXTBSY",
	syscall.EFBIG:        "EFBIG",
	syscall.ENOSPC:       "ENOSPC",
	syscall.ESPIPE:       "ESPIPE",
	syscall.EROFS:        "EROFS",
	syscall.EMLINK:       "EMLINK",
	syscall.EPIPE:        "EPIPE",
	syscall.EDOM:         "EDOM",
	syscall.ERANGE:       "ERANGE",
	syscall.EDEADLK:      "EDEADLK",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ENOLCK:       "ENOLCK",
	syscall.ENOSYS:       "ENOSYS",
	syscall.ENOTEMPTY:    "ENOTEMPTY",
	syscall.ELOOP:        "ELOOP",
	syscall.EOVERFLOW:    "EOVERFLOW",
	syscall.EOPNOTSUPP:   "EOPNOTSUPP",
	syscall.EADDRINUSE:   "EADDRINUSE",
	syscall.ECONNREFUSED: "ECONNREFUSED",
	syscall.ETIMEDOUT:    "ETIMEDOUT",
	syscall.EUSERS:       "EUSERS",
	syscall.EDQUOT:       "EDQUOT",
}

// ErrnoName returns the symbolic name of e, such as "EPERM", or "errno N"
// for one not in the table.
func ErrnoName(e syscall.Errno) string {
	if name, ok := errnoNames[e]; ok {
		return name
	}
	return fmt.Sprintf("errno %d", uintptr(e))
}
