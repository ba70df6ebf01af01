package supervisor

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/sandbox/spec"
)

// recvSync reads the init's next message on the sync socket into buf and
// returns its length, as read(2) would. The one message that carries a
// descriptor, the proxy endpoint (spec.Listener, SCM_RIGHTS), is taken
// here: kept in l.listener, and the next message read. Any other
// descriptor the socket delivers is closed at once and is an error, so
// nothing the init sends can leave a descriptor open in the supervisor.
func (l *launch) recvSync(buf []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(l.sync, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			return 0, err
		}
		fds, err := rights(oob[:oobn])
		if err != nil {
			return 0, err
		}
		switch {
		case flags&unix.MSG_CTRUNC != 0:
			closeFDs(fds)
			return 0, errors.New("read sync socket: a message carried more descriptors than the one expected")
		case n == len(spec.Listener) && buf[0] == spec.Listener[0] && len(fds) == 1 && l.listener == nil:
			l.listener = os.NewFile(uintptr(fds[0]), "proxy listener")
			continue
		case len(fds) > 0 || (n == len(spec.Listener) && buf[0] == spec.Listener[0]):
			closeFDs(fds)
			return 0, fmt.Errorf("read sync socket: unexpected message %.40q with %d descriptor(s)", buf[:n], len(fds))
		}
		return n, nil
	}
}

// rights returns the descriptors of the SCM_RIGHTS messages in oob.
func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("read sync socket: parse control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("read sync socket: control message: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
