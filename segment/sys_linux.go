package segment

import (
	"syscall"

	"golang.org/x/sys/unix"
)

var errNoSpace = syscall.ENOSPC

// The segment keeps its file's descriptor as an int: regular files never go
// through the netpoller, and calling the syscalls directly avoids a closure
// allocation per append or sync that os.File.SyscallConn would cost.

func fdatasync(fd int) error {
	for {
		err := unix.Fdatasync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}

// pwritev writes a then b at off, looping over short writes.
func pwritev(fd int, a, b []byte, off int64) error {
	iov := [2][]byte{a, b}
	bufs := iov[:]
	for len(bufs) > 0 {
		n, err := unix.Pwritev(fd, bufs, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if len(bufs) > 0 {
			bufs[0] = bufs[0][n:]
		}
	}
	return nil
}
